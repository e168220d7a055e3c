# The Kubernetes node agent: the daemon image plus the offline base's root
# filesystem, from which the DaemonSet's init container builds the runner
# images into the node's containerd (`images build --driver containerd
# --base-rootfs /usr/share/dsh-container/base-rootfs.tar`: no registry, no
# Docker on the node). `make agent-image` builds it, with a context folder
# holding base-rootfs.tar (the offline base exported from Docker) and
# tini-static (the host's).
ARG DAEMON=dsh-container/daemon:latest
FROM ${DAEMON}
COPY base-rootfs.tar /usr/share/dsh-container/base-rootfs.tar
# The static init every sandbox runs as its PID 1 (the containerd driver
# copies it into its state directory, the run folder the node shares, so
# containerd on the node can bind-mount it).
COPY tini-static /usr/bin/tini-static
LABEL dsh-container.io/image="agent"
