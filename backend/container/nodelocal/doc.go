// Package nodelocal is the help a driver whose sandboxes run on this
// machine may use: code that reads this host's files (cgroupfs, /proc) or
// makes them, written once for every such driver. The core runtime and
// the drivers import it; it imports neither, so a driver whose sandboxes
// live elsewhere (a Pod) leaves it out and brings its own.
package nodelocal
