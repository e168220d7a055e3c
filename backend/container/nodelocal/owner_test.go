package nodelocal

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestOwnerLiveness(t *testing.T) {
	alive := Owners{}.Alive
	if !alive(SelfOwner()) {
		t.Fatal("this process judged dead")
	}
	if OwnerOf(os.Getpid()) != SelfOwner() {
		t.Fatalf("OwnerOf(self) = %q, SelfOwner() = %q", OwnerOf(os.Getpid()), SelfOwner())
	}
	host, _ := os.Hostname()
	for _, dead := range []string{"999999999.1." + HostTag(), "1.0." + HostTag(), host + "/999999999/1", host + "/1/not-a-start"} {
		if alive(dead) {
			t.Errorf("%q judged live", dead)
		}
	}
	// Labels of neither form (WithOwner) cannot be judged: their
	// containers are left alone.
	for _, foreign := range []string{"garbage", "e2e-1-typescript-2", "x.y.z", "1.2.3.4", host + "/x/y"} {
		if !alive(foreign) {
			t.Errorf("%q judged dead; it cannot be judged", foreign)
		}
	}
	for _, other := range []string{"1.1.00000000", "some-other-host/1/2"} {
		if !alive(other) {
			t.Errorf("another host's owner %q judged dead; it cannot be judged from here", other)
		}
	}
	base := t.TempDir()
	own := filepath.Join(base, SockDirPrefix+"own")
	os.WriteFile(own+OwnerSuffix, []byte(SelfID()), 0o600)
	dead := filepath.Join(base, SockDirPrefix+"dead")
	os.WriteFile(dead+OwnerSuffix, []byte("999999999.1"), 0o600)
	switch {
	case !DirLive(base, filepath.Base(own)):
		t.Error("own socket dir judged dead")
	case DirLive(base, filepath.Base(dead)):
		t.Error("dead socket dir judged live")
	case DirLive(base, SockDirPrefix+"no-owner-file"):
		t.Error("a socket dir without an owner file judged live")
	case !DirLive(base, fmt.Sprintf("run-%s-abc", SelfID())):
		t.Error("own socket dir of the earlier layout judged dead")
	case DirLive(base, "run-999999999.1-abc"):
		t.Error("dead socket dir of the earlier layout judged live")
	case !DirLive(base, "not-ours"):
		t.Error("a directory that is not ours judged dead")
	}
}

// The earlier versions' "<host>/<pid>/<start>" owners are still judged.
func TestLegacyOwnerLiveness(t *testing.T) {
	host, _ := os.Hostname()
	for owner, want := range map[string]bool{
		SelfOwner(): true,
		fmt.Sprintf("%s/%d/%s", host, os.Getpid(), ProcessStart(os.Getpid())): true,
		fmt.Sprintf("%s/%d/1", host, os.Getpid()):                             false, // pid reused
		fmt.Sprintf("%s/%d/%s", host, 1<<30, "5"):                             false, // no such pid
		"other.invalid/1/1": true, // cannot judge another host
		host + "/e2e-1":     true, // not our format
		host + "/x/1":       true,
		"":                  true,
	} {
		if got := (Owners{}).Alive(owner); got != want {
			t.Errorf("Alive(%q) = %v, want %v", owner, got, want)
		}
	}
}

// A process that has exited is dead; OwnerOf names no process that is
// not there.
func TestOwnerOfAnExitedProcess(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Skip("no true(1):", err)
	}
	owner := OwnerOf(cmd.Process.Pid)
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if owner != "" && (Owners{}).Alive(owner) {
		t.Fatalf("%q judged live after its process exited", owner)
	}
	if got := OwnerOf(cmd.Process.Pid); got != "" && got == owner {
		t.Fatalf("OwnerOf an exited pid: %q", got)
	}
}
