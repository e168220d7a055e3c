package container

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dsh-container/dsh-container/backend/container/nodelocal"
)

// reapDriver is the fake driver with creation times, so grace periods can
// be tested.
type reapDriver struct {
	*fakeDriver
	created map[string]time.Time
}

func (d *reapDriver) List(ctx context.Context, label, value string) ([]ContainerInfo, error) {
	list, err := d.fakeDriver.List(ctx, label, value)
	for i := range list {
		list[i].Created = d.created[list[i].ID]
	}
	return list, err
}

func (d *reapDriver) add(t *testing.T, owner, sockDir string, age time.Duration) string {
	t.Helper()
	labels := map[string]string{LabelManaged: "true", LabelOwner: owner}
	if sockDir != "" {
		labels[LabelBridge] = filepath.Base(sockDir)
	}
	return d.addLabels(t, labels, age)
}

// addLegacy adds a container labelled as earlier versions did.
func (d *reapDriver) addLegacy(t *testing.T, owner, sockDir string, age time.Duration) string {
	t.Helper()
	return d.addLabels(t, map[string]string{legacyLabelManaged: "true", legacyLabelOwner: owner, legacyLabelSockDir: sockDir}, age)
}

func (d *reapDriver) addLabels(t *testing.T, labels map[string]string, age time.Duration) string {
	t.Helper()
	id, err := d.Create(context.Background(), Spec{Labels: labels})
	if err != nil {
		t.Fatal(err)
	}
	d.created[id] = time.Now().Add(-age)
	return id
}

func (d *reapDriver) ids() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for id := range d.containers {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

func TestReap(t *testing.T) {
	host, _ := os.Hostname()
	pid := os.Getpid()
	live := defaultOwner()
	// The same pid with another start time: the pid was reused, the owner
	// is dead.
	dead := fmt.Sprintf("%d.1.%s", pid, nodelocal.HostTag())
	hour := time.Hour

	base, err := os.MkdirTemp("", "dshr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	mkdir := func(name string, age time.Duration) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
		then := time.Now().Add(-age)
		if err := os.Chtimes(p, then, then); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// owned makes a socket directory of the current layout with its owner
	// file.
	owned := func(name, owner string, age time.Duration) string {
		if err := os.WriteFile(filepath.Join(base, name+nodelocal.OwnerSuffix), []byte(owner), 0o600); err != nil {
			t.Fatal(err)
		}
		return mkdir(name, age)
	}
	liveDir := owned(nodelocal.SockDirPrefix+"live", nodelocal.SelfID(), hour)
	deadDir := owned(nodelocal.SockDirPrefix+"dead", fmt.Sprintf("%d.1", pid), hour)
	deadFresh := owned(nodelocal.SockDirPrefix+"fresh", fmt.Sprintf("%d.1", pid), 0)
	orphan := mkdir(fmt.Sprintf("run-%d.1-orphan", pid), hour) // the earlier layout; no container
	noOwnerFile := mkdir(nodelocal.SockDirPrefix+"no-owner-file", hour)
	notOurs := mkdir("something-else", hour)
	garbled := mkdir("run-garbled", hour)
	// An owner file whose directory is gone: removed once its owner is.
	strayOwner := filepath.Join(base, nodelocal.SockDirPrefix+"stray"+nodelocal.OwnerSuffix)
	os.WriteFile(strayOwner, []byte(fmt.Sprintf("%d.1", pid)), 0o600)
	os.Chtimes(strayOwner, time.Now().Add(-hour), time.Now().Add(-hour))

	d := &reapDriver{fakeDriver: newFakeDriver(t, nil), created: map[string]time.Time{}}
	liveID := d.add(t, live, liveDir, hour)
	deadID := d.add(t, dead, deadDir, hour)
	deadYoung := d.add(t, dead, "", 0)
	otherHost := d.add(t, "1.1.00000000", "", hour)
	foreign := d.add(t, "e2e-42-typescript-1", "", hour) // set by WithOwner: cannot be judged
	noOwner := d.add(t, "", "", hour)
	// Earlier versions' labels: a dead owner's container and its directory
	// go, another host's stays.
	legacyDir := mkdir(fmt.Sprintf("run-%d.1-legacy", pid), hour)
	legacyDead := d.addLegacy(t, fmt.Sprintf("%s/%d/1", host, pid), legacyDir, hour)
	legacyOther := d.addLegacy(t, "elsewhere.invalid/1/1", "", hour)

	// With a grace period, only old leftovers of dead owners go.
	rep, err := Reap(context.Background(), d, ReapOptions{SocketDir: base, Grace: 30 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rep.Containers)
	wantReaped := []string{deadID, legacyDead}
	slices.Sort(wantReaped)
	if !slices.Equal(rep.Containers, wantReaped) {
		t.Fatalf("reaped containers %v, want only the dead owners' %v", rep.Containers, wantReaped)
	}
	slices.Sort(rep.SocketDirs)
	want := []string{deadDir, garbled, orphan, noOwnerFile, legacyDir}
	slices.Sort(want)
	if !slices.Equal(rep.SocketDirs, want) {
		t.Fatalf("reaped socket dirs %v, want %v", rep.SocketDirs, want)
	}
	wantIDs := []string{liveID, deadYoung, otherHost, foreign, legacyOther}
	if noOwner != "" {
		// An empty owner label cannot be judged either.
		wantIDs = append(wantIDs, noOwner)
	}
	slices.Sort(wantIDs)
	if got := d.ids(); !slices.Equal(got, wantIDs) {
		t.Fatalf("containers left %v, want %v", got, wantIDs)
	}
	for _, p := range []string{liveDir, liveDir + nodelocal.OwnerSuffix, deadFresh, deadFresh + nodelocal.OwnerSuffix, notOurs} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s removed: %v", p, err)
		}
	}
	for _, p := range []string{deadDir + nodelocal.OwnerSuffix, strayOwner} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s left: %v", p, err)
		}
	}

	// Without one, the young leftovers go too; the live, foreign and
	// other-host ones stay.
	rep, err = Reap(context.Background(), d, ReapOptions{SocketDir: base})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rep.Containers, []string{deadYoung}) || !slices.Equal(rep.SocketDirs, []string{deadFresh}) {
		t.Fatalf("second reap: %+v", rep)
	}
	wantIDs = slices.DeleteFunc(wantIDs, func(id string) bool { return id == deadYoung })
	if got := d.ids(); !slices.Equal(got, wantIDs) {
		t.Fatalf("containers left %v, want %v", got, wantIDs)
	}
	entries, _ := os.ReadDir(base)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{filepath.Base(liveDir), filepath.Base(liveDir) + nodelocal.OwnerSuffix, "something-else"}) {
		t.Fatalf("socket dirs left %v", names)
	}
}

func TestReapMissingSocketDir(t *testing.T) {
	d := &reapDriver{fakeDriver: newFakeDriver(t, nil), created: map[string]time.Time{}}
	rep, err := Reap(context.Background(), d, ReapOptions{SocketDir: filepath.Join(os.TempDir(), "dsh-no-such-dir-for-reap")})
	if err != nil || len(rep.Containers)+len(rep.SocketDirs) != 0 {
		t.Fatalf("reap over nothing: %+v, %v", rep, err)
	}
}

// judge is an OwnerJudge that knows its owners without /proc, as a
// driver whose sandboxes live elsewhere would.
type judge struct{ dead map[string]bool }

func (j judge) Alive(owner string) bool { return !j.dead[owner] }

// sweeper is an EndpointSweeper that records what it is asked.
type sweeper struct {
	removed []string
	grace   []time.Duration
}

func (s *sweeper) Remove(bridge string) (string, bool) {
	if bridge == "" {
		return "", false
	}
	s.removed = append(s.removed, bridge)
	return "remote:" + bridge, true
}

func (s *sweeper) Sweep(grace time.Duration) ([]string, error) {
	s.grace = append(s.grace, grace)
	return []string{"remote:swept"}, nil
}

// Reap asks the judge and the sweeper it is given, not /proc and the
// socket directory.
func TestReapTakesItsOwnerJudgeAndSweeper(t *testing.T) {
	base := t.TempDir()
	// A dead local owner's socket directory the default sweeper would
	// remove: another sweeper leaves it alone.
	local := filepath.Join(base, nodelocal.SockDirPrefix+"local")
	os.WriteFile(local+nodelocal.OwnerSuffix, []byte("999999999.1"), 0o600)
	os.Mkdir(local, 0o700)
	os.Chtimes(local, time.Now().Add(-time.Hour), time.Now().Add(-time.Hour))
	d := &reapDriver{fakeDriver: newFakeDriver(t, nil), created: map[string]time.Time{}}
	gone := d.add(t, "pod-gone", "s-gone", time.Hour)
	here := d.add(t, "pod-here", "s-here", time.Hour)
	// This process's own label, judged dead by this judge.
	mine := d.add(t, defaultOwner(), "", time.Hour)
	sw := &sweeper{}
	rep, err := Reap(context.Background(), d, ReapOptions{SocketDir: base, Grace: time.Minute,
		Owners: judge{dead: map[string]bool{"pod-gone": true, defaultOwner(): true}}, Endpoints: sw})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rep.Containers)
	want := []string{gone, mine}
	slices.Sort(want)
	if !slices.Equal(rep.Containers, want) || !slices.Equal(d.ids(), []string{here}) {
		t.Fatalf("reaped %v, left %v; want %v reaped", rep.Containers, d.ids(), want)
	}
	if !slices.Equal(rep.SocketDirs, []string{"remote:s-gone", "remote:swept"}) || !slices.Equal(sw.removed, []string{"s-gone"}) || !slices.Equal(sw.grace, []time.Duration{time.Minute}) {
		t.Fatalf("report %v; the sweeper removed %v, swept with %v", rep.SocketDirs, sw.removed, sw.grace)
	}
	if _, err := os.Stat(local); err != nil {
		t.Fatalf("the node-local socket directory was swept: %v", err)
	}
}
