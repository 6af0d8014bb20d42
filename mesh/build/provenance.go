package build

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/meshbus/mesh/mesh/wire"
)

// An artifact is the toolchain's program for the module followed by a
// trailer that says what it was built from:
//
//	program | record | length | magic
//
// record is the JSON of Provenance; length is the record's length, eight
// bytes big-endian; magic is the 16 bytes of trailerMagic. A loader runs
// an ELF by its program headers and ignores bytes after them, so the
// artifact runs as the program does; the trailer is found from the end.
// Nothing in it depends on when or where it was built, so a revision
// built twice is the same bytes, and so the same digest.
const trailerMagic = "mesh-provenance1"

const footerSize = 8 + len(trailerMagic)

// maxRecord bounds a trailer's record: a revision's content in base64 and
// the names around it.
const maxRecord = 2*wire.MaxSourceContent + 4<<10

// ErrProvenance is wrapped by every refusal to read an artifact's trailer.
var ErrProvenance = errors.New("artifact provenance")

// Provenance is what an artifact records of its making.
type Provenance struct {
	Repo     string `json:"repo"`
	Module   string `json:"module"`
	Revision string `json:"revision"`
	// Program is the digest (wire.Digest) of the toolchain's program the
	// artifact begins with.
	Program string `json:"program"`
	// Content is the revision's content, as the repository answered it.
	Content []byte `json:"content"`
}

// ID is the id of the build that made the artifact (wire.BuildID).
func (p Provenance) ID() string { return wire.BuildID(p.Repo, p.Module, p.Revision) }

// Assemble is the artifact of req: the program base followed by the
// trailer recording req's repository, module and revision and the
// revision's content. It is a function of its inputs alone.
func Assemble(base []byte, req wire.BuildRequest, content []byte) []byte {
	record := wire.Marshal(Provenance{
		Repo:     req.Repo,
		Module:   req.Module,
		Revision: req.Revision,
		Program:  wire.Digest(base),
		Content:  content,
	})
	out := make([]byte, 0, len(base)+len(record)+footerSize)
	out = append(out, base...)
	out = append(out, record...)
	out = binary.BigEndian.AppendUint64(out, uint64(len(record)))
	return append(out, trailerMagic...)
}

// ReadProvenance reads an artifact's trailer back, and checks that the
// program before it is the one it names.
func ReadProvenance(artifact []byte) (Provenance, error) {
	if len(artifact) < footerSize || string(artifact[len(artifact)-len(trailerMagic):]) != trailerMagic {
		return Provenance{}, fmt.Errorf("%w: no trailer (the artifact does not end with %q)", ErrProvenance, trailerMagic)
	}
	footer := len(artifact) - footerSize
	n := binary.BigEndian.Uint64(artifact[footer:])
	if n > uint64(footer) || n > maxRecord {
		return Provenance{}, fmt.Errorf("%w: the trailer says its record is %d bytes, in an artifact of %d", ErrProvenance, n, len(artifact))
	}
	start := footer - int(n)
	dec := json.NewDecoder(bytes.NewReader(artifact[start:footer]))
	dec.DisallowUnknownFields()
	var p Provenance
	if err := dec.Decode(&p); err != nil {
		return Provenance{}, fmt.Errorf("%w: record: %v", ErrProvenance, err)
	}
	if dec.More() {
		return Provenance{}, fmt.Errorf("%w: record: more than one JSON value", ErrProvenance)
	}
	for _, f := range []struct {
		name  string
		check func(string) error
		value string
	}{
		{"repo", wire.CheckName, p.Repo},
		{"module", wire.CheckName, p.Module},
		{"revision", wire.CheckRevision, p.Revision},
	} {
		if err := f.check(f.value); err != nil {
			return Provenance{}, fmt.Errorf("%w: %s: %v", ErrProvenance, f.name, err)
		}
	}
	if got := wire.Digest(artifact[:start]); got != p.Program {
		return Provenance{}, fmt.Errorf("%w: the record names program %s, the artifact begins with %s", ErrProvenance, p.Program, got)
	}
	return p, nil
}
