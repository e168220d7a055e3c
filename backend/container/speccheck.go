package container

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/containerd/errdefs"
)

// maxID is the largest uid or gid a Spec may name: (uid_t)-1,
// 4294967295, means "no change" to setresuid(2) and is no identity.
const maxID = 1<<32 - 2

// ParseUser reads a Spec's User, which must be a numeric "uid:gid", each a
// decimal number from 0 to 4294967294. A driver never resolves a name
// through the image's /etc/passwd, nor a uid alone through it to a group:
// the image would then choose the identity (an oversized USER has been
// read as root that way). Anything else is an errdefs.ErrInvalidArgument
// naming the value, refused before anything is created.
func ParseUser(u string) (uid, gid uint32, err error) {
	us, gs, found := strings.Cut(u, ":")
	id := func(s string) (uint32, bool) {
		// Base 10 takes no sign, space, prefix or underscore.
		n, err := strconv.ParseUint(s, 10, 32)
		return uint32(n), err == nil && n <= maxID
	}
	uid, okU := id(us)
	gid, okG := id(gs)
	if !found || !okU || !okG {
		return 0, 0, fmt.Errorf("%w: User %q: want a numeric uid:gid, each from 0 to %d (names and a uid alone would be resolved through the image's /etc/passwd)", errdefs.ErrInvalidArgument, u, maxID)
	}
	return uid, gid, nil
}

// ReservedLabels are the container labels the runtime sets and its reaper
// reads (and the earlier labels the reaper still reads) to decide whose a
// container is and what to remove with it. An image must not carry any of
// them: an engine that merges an image's labels into its containers' —
// Docker does, for every key the container does not set itself — would
// let the image speak for the runtime, for instance mark a live container
// as a dead owner's leftover. Drivers of such engines refuse those images
// (errdefs.ErrInvalidArgument). Other labels under LabelPrefix (the runner
// images carry dsh-container.io/image, inputs and base) are the image's
// own description; nothing reads them from a container.
func ReservedLabels() []string {
	return []string{
		LabelManaged, LabelOwner, LabelRun, LabelBridge, LabelLang,
		legacyLabelManaged, legacyLabelOwner, legacyLabelSockDir,
	}
}
