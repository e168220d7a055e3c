package container

import (
	"context"
	"errors"
	"fmt"

	"github.com/containerd/errdefs"

	"github.com/dsh-container/dsh-container/backend"
	"github.com/dsh-container/dsh-container/tsprep"
)

// maxStripWorkers bounds the type-strip workers of one runtime, and so how
// many programs it strips at once.
const maxStripWorkers = 2

// ProgramFile is the file name runners give the program in stack traces.
func ProgramFile(lang backend.Language) string {
	if lang == backend.Python {
		return "program.py"
	}
	return tsprep.SourceFile
}

// prepared is a program ready for the run frame.
type prepared struct {
	program   string
	sourceMap string
}

// prepare validates a program and, for TypeScript, strips its types in a
// worker process (tsprep). A program that does not parse, nests too deeply
// or breaks a worker limit comes back as a Failure and never reaches a
// container; err is for cancellation and for a worker that could not run
// (errdefs.ErrUnavailable).
func prepare(ctx context.Context, lang backend.Language, src string, s *tsprep.Stripper) (prepared, *backend.Failure, error) {
	if lang != backend.TypeScript {
		return prepared{program: src}, nil, nil
	}
	p, err := s.Prepare(ctx, src)
	var pe *tsprep.ProgramError
	var we *tsprep.WorkerError
	switch {
	case errors.As(err, &pe):
		return prepared{}, &backend.Failure{Kind: backend.FailureException, Message: pe.Message}, nil
	case errors.As(err, &we):
		return prepared{}, nil, fmt.Errorf("%w: %w", errdefs.ErrUnavailable, err)
	case err != nil:
		return prepared{}, nil, err
	}
	return prepared{program: p.Program, sourceMap: p.SourceMap}, nil, nil
}
