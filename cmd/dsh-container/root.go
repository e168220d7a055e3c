package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/images"
)

// Exit statuses.
const (
	exitOK      = 0
	exitProgram = 1 // the program failed
	exitUsage   = 2 // usage or environment error
)

// Version is set at build time (-ldflags "-X main.Version=...").
var Version = "dev"

// factory carries what every command needs; commands take it rather than
// reaching for globals, so tests can run them in-process.
type factory struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	verbose        bool
	// connect opens the driver the engine flags choose (openDriver);
	// tests may replace it.
	connect func(ctx context.Context) (engine, error)
	// connectAll opens every engine that answers (gc without --driver).
	connectAll func(ctx context.Context) ([]engine, error)
	// drv holds --driver, --containerd-address, --containerd-namespace.
	drv driverFlags
	// imageFor names the runner image of a language; tests may replace it.
	imageFor func(lang backend.Language) (string, error)
}

func defaultImageFor(lang backend.Language) (string, error) {
	im, err := images.RunnerFor(lang)
	if err != nil {
		return "", err
	}
	return im.DefaultTag(), nil
}

func (f *factory) logger() *slog.Logger {
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(f.stderr, &slog.HandlerOptions{Level: level}))
}

// programFailed is returned by run when the program itself failed: exit 1,
// its report already printed.
var errProgramFailed = errors.New("program failed")

// usageError marks bad flags or arguments.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func newRootCmd(f *factory) *cobra.Command {
	root := &cobra.Command{
		Use:   "dsh-container",
		Short: "Run model-written programs in throwaway hardened containers (Code Mode)",
		Long: `dsh-container runs TypeScript and Python programs written by language models
in a fresh, hardened container per program (no network, read-only root,
non-root, all capabilities dropped, cgroup limits), and lets them call the
host's tools through a generated SDK over a websocket bridge.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().BoolVarP(&f.verbose, "verbose", "v", false, "log debug detail to stderr")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(
		newRunCmd(f, nil),
		newSDKCmd(f),
		newImagesCmd(f),
		newDoctorCmd(f),
		newGCCmd(f),
		newVersionCmd(f),
		newBenchCmd(f),
		newServeCmd(f),
		newMCPCmd(f),
	)
	return root
}

// Main runs the CLI and returns the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	f := &factory{stdin: stdin, stdout: stdout, stderr: stderr, imageFor: defaultImageFor}
	f.connect, f.connectAll = f.openDriver, f.openAll
	return f.main(args)
}

func (f *factory) main(args []string) int {
	root := newRootCmd(f)
	root.SetArgs(args)
	root.SetIn(f.stdin)
	root.SetOut(f.stdout)
	root.SetErr(f.stderr)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := root.ExecuteContext(ctx)
	return exitCode(err, f.stderr)
}

// exitCode is the one place errors become exit statuses and messages.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errProgramFailed):
		return exitProgram
	}
	var ue usageError
	if errors.As(err, &ue) || isCobraUsage(err) {
		fmt.Fprintf(stderr, "dsh-container: %v (see --help)\n", err)
		return exitUsage
	}
	// Everything else kept the program from running: the daemon, an image,
	// a file, a flag value. The message names the fix.
	fmt.Fprintf(stderr, "dsh-container: %v\n", err)
	return exitUsage
}

func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand", "accepts ", "requires at least", "invalid argument"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
