package store

import (
	"fmt"
	"slices"
	"time"

	"github.com/meshbus/mesh/mesh/wire"
)

// Build is a build the controller asked for (a repository announced the
// revision) and, once the builder said, what became of it.
type Build struct {
	ID       string    `json:"id"`
	Repo     string    `json:"repo"`
	Module   string    `json:"module"`
	Revision string    `json:"revision"`
	Asked    time.Time `json:"asked"`
	// Outcome is empty while the build is asked for, then
	// wire.BuildSucceeded or wire.BuildFailed.
	Outcome string `json:"outcome,omitempty"`
	// Digest, Size and Chunks name the artifact of a build that
	// succeeded; Error says why one failed.
	Digest  string    `json:"digest,omitempty"`
	Size    int64     `json:"size,omitempty"`
	Chunks  int       `json:"chunks,omitempty"`
	Error   string    `json:"error,omitempty"`
	Builder string    `json:"builder,omitempty"`
	Built   time.Time `json:"built,omitzero"`
}

// Request is the build request the build is asked with.
func (b Build) Request() wire.BuildRequest {
	return wire.BuildRequest{ID: b.ID, Repo: b.Repo, Module: b.Module, Revision: b.Revision, Asked: b.Asked}
}

// CheckBuild refuses a build record without its id or its triple.
func CheckBuild(b Build) error {
	if b.ID == "" || b.ID != wire.BuildID(b.Repo, b.Module, b.Revision) || b.Asked.IsZero() {
		return fmt.Errorf("put build: an id of its repo, module and revision and when it was asked are required, got %+v", b)
	}
	return nil
}

// BuiltArtifact is the build that produced digest, if one did.
func BuiltArtifact(builds []Build, digest string) (Build, bool) {
	i := slices.IndexFunc(builds, func(b Build) bool { return b.Outcome == wire.BuildSucceeded && b.Digest == digest })
	if i < 0 {
		return Build{}, false
	}
	return builds[i], true
}
