module github.com/dsh-container/dsh-container

go 1.26.8

require (
	github.com/containerd/errdefs v1.0.0 // indirect
	github.com/docker/docker v28.5.2+incompatible // indirect
	github.com/evanw/esbuild v0.28.2 // indirect
	github.com/gorilla/websocket v1.5.3 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/prometheus/client_golang v1.25.0 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	go.uber.org/goleak v1.3.0 // indirect
)
