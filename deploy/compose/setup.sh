#!/bin/sh
# Makes what docker-compose.yml mounts, in deploy/compose/secrets/ (kept
# out of git): a development CA, the daemon's TLS certificate for
# localhost/127.0.0.1 signed by it, and an auth file with one tenant whose
# token is printed once. For production, bring your own certificate and
# write the auth file yourself:
#   printf %s "$TOKEN" | sha256sum   # the tenant's tokenSha256
set -eu
dir=$(dirname "$0")/secrets
mkdir -p "$dir"
chmod 700 "$dir"
cd "$dir"
if [ ! -f tls.key ]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
		-subj "/CN=dsh-container dev CA" -keyout ca.key -out ca.pem 2>/dev/null
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
		-subj "/CN=localhost" -keyout tls.key -out tls.csr 2>/dev/null
	printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > ext.cnf
	openssl x509 -req -in tls.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 365 \
		-extfile ext.cnf -out tls.pem 2>/dev/null
	rm -f tls.csr ext.cnf ca.srl
	# The daemon runs as root in its container, but keep the key private.
	chmod 600 ca.key tls.key
fi
if [ ! -f auth.json ]; then
	token=$(openssl rand -hex 32)
	sum=$(printf %s "$token" | sha256sum | cut -d' ' -f1)
	printf '{"tenants":[{"name":"default","tokenSha256":"%s","metrics":true}]}\n' "$sum" > auth.json
	chmod 600 auth.json
	echo "tenant \"default\" token (shown once; export DSH_TOKEN=...): $token"
fi
echo "CA for clients: $(pwd)/ca.pem"
