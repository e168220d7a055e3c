package container

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/dsh-container/dsh-container/backend/container/nodelocal"
)

// maxSocketPath is sizeof(sockaddr_un.sun_path) on Linux.
const maxSocketPath = 108

// NewUnixEndpoint is the bridge endpoint of a node-local driver: a Unix
// socket in a fresh private directory under base, which the spec mounts
// read-only at BridgeDir. The directory is 0711 inside a 0700 base, the
// socket 0666: the container's user can connect, no other host user can
// reach it. Its name is random (the container sees it in its mount
// table); its owner, this process, is recorded in a sibling
// "<name>.owner" file that the reaper reads (see nodelocal's sockdir.go), written
// before the directory and removed after it.
func NewUnixEndpoint(base string) (_ *Endpoint, retErr error) {
	if err := nodelocal.PrivateDir(base); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	name := nodelocal.SockDirPrefix + hex.EncodeToString(rnd[:])
	dir := filepath.Join(base, name)
	path := filepath.Join(dir, SocketName)
	if len(path) >= maxSocketPath {
		return nil, fmt.Errorf("bridge socket path %s is %d bytes; Unix sockets allow %d: choose a shorter socket directory", path, len(path), maxSocketPath-1)
	}
	if err := os.WriteFile(dir+nodelocal.OwnerSuffix, []byte(nodelocal.SelfID()), 0o600); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o711); err != nil {
		os.Remove(dir + nodelocal.OwnerSuffix)
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	removeAll := func() error {
		err := os.RemoveAll(dir)
		if rerr := os.Remove(dir + nodelocal.OwnerSuffix); rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
			err = errors.Join(err, rerr)
		}
		return err
	}
	defer func() {
		if retErr != nil {
			removeAll()
		}
	}()
	// Mkdir applies the umask.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("bridge socket: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, err
	}
	var once sync.Once
	var closeErr error
	return &Endpoint{
		Listener:      ln,
		RunnerAddress: BridgeSocket,
		BindDir:       dir,
		Label:         name,
		Close: func() error {
			once.Do(func() {
				if err := ln.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
					closeErr = err
				}
				closeErr = errors.Join(closeErr, removeAll())
			})
			return closeErr
		},
	}, nil
}
