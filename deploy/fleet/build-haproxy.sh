#!/bin/sh
# Builds the fleet's load balancer image, dsh-container/haproxy:<tag>,
# offline like the runner base: a Debian trixie root filesystem with
# HAProxy made by mmdebstrap from Debian packages and imported into the
# local Docker daemon (no registry). Prints the tag; skips the build when
# the image is there. Tags it dsh-container/haproxy:latest too (what
# deploy/fleet/docker-compose.yml runs). `make fleet-images` runs it.
set -eu
suite=${DSH_FLEET_SUITE:-trixie}
mirror=${DSH_FLEET_MIRROR:-http://deb.debian.org/debian}
pkgs=haproxy,ca-certificates
tag=dsh-container/haproxy:$suite-$(printf '%s\n' "$suite" "$mirror" "$pkgs" | sha256sum | cut -c1-12)
if docker image inspect "$tag" >/dev/null 2>&1; then
	docker tag "$tag" dsh-container/haproxy:latest
	echo "$tag"
	exit 0
fi
command -v mmdebstrap >/dev/null || { echo "build-haproxy: mmdebstrap is needed (apt-get install mmdebstrap)" >&2; exit 2; }
echo "build-haproxy: building $tag from Debian $suite packages ($pkgs)" >&2
mmdebstrap --variant=minbase --include="$pkgs" "$suite" - "$mirror" 2>&2 |
	docker import \
		--change 'LABEL dsh-container.io/image=haproxy' \
		--change 'ENTRYPOINT ["/usr/sbin/haproxy", "-W", "-db", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]' \
		- "$tag" >/dev/null
docker tag "$tag" dsh-container/haproxy:latest
echo "$tag"
