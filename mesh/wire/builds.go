package wire

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Builds (design 25 §1, §9 step 4: "a build source's change reaching the
// builder"). A source repository announces a revision on
// SourceChanged(repo) (CONTROL); the controller records it and asks for
// the build on SubjectBuildRequest (BUILDS, a work queue the builders
// share through BuildsConsumer, one build at a time); the builder fetches
// exactly that revision from the repository (SourceFetch, core
// request/reply), builds it into an artifact, stores the artifact in
// ARTIFACTS in chunks (ArtifactChunk) and publishes the outcome on
// SubjectBuilt (CONTROL), which the controller records once.

// StreamArtifacts holds the built artifacts, in AccountControl: a chunk per
// subject (ArtifactChunk), the newest of each, read by a direct get.
const StreamArtifacts = "ARTIFACTS"

// Subjects of the build path.
const (
	// SubjectSourceChanges matches every repository's announcements.
	SubjectSourceChanges = "mesh.control.source.*.changed"
	// SubjectArtifactsAll is every artifact's chunks.
	SubjectArtifactsAll = "mesh.artifact.>"
	// SourceNode is a name no node may take: a host may publish under its
	// node's control subjects, and mesh.control.source.> is the
	// repositories'.
	SourceNode = "source"
)

// SourceChanged is where repository repo announces a revision.
func SourceChanged(repo string) string { return "mesh.control.source." + repo + ".changed" }

// SourceOf is the repository whose announcement subject is, if it is one.
func SourceOf(subject string) (repo string, ok bool) {
	rest, ok := strings.CutPrefix(subject, "mesh.control.source.")
	if !ok {
		return "", false
	}
	repo, ok = strings.CutSuffix(rest, ".changed")
	if !ok || CheckName(repo) != nil {
		return "", false
	}
	return repo, true
}

// SourceFetch is where repository repo answers for a revision's content.
func SourceFetch(repo string) string { return "mesh.source." + repo + ".fetch" }

// ArtifactChunk is the subject of chunk n (from 0) of the artifact of
// digest (Digest's spelling, "sha256:<hex>").
func ArtifactChunk(digest string, n int) string {
	return "mesh.artifact." + strings.TrimPrefix(digest, digestPrefix) + "." + strconv.Itoa(n)
}

// ArtifactChunks matches every chunk of the artifact of digest: a host is
// granted the direct get of these for the artifacts declared to it.
func ArtifactChunks(digest string) string {
	return "mesh.artifact." + strings.TrimPrefix(digest, digestPrefix) + ".*"
}

// Users of the build path.
const (
	// BuilderUser is the build machine's user in AccountControl.
	BuilderUser = "builder"
	// BuilderInbox is the builder's inbox prefix.
	BuilderInbox = inbox + ".builder"
	// PrincipalBuilder and PrincipalSource are their credentials' kinds.
	PrincipalBuilder = "builder"
	PrincipalSource  = "source"
)

// SourceUser is the user of repository repo, in AccountSources.
func SourceUser(repo string) string { return "source." + repo }

// SourceQueueGroup is the queue group a repository's answerers share on
// SourceFetch, so that two of them running answer each fetch once.
const SourceQueueGroup = "source"

// SourceInbox is repository repo's inbox prefix.
func SourceInbox(repo string) string { return inbox + ".source." + repo }

// ArtifactChunkSize is the most bytes one chunk of an artifact carries,
// well under the bus's payload limit.
const ArtifactChunkSize = 256 << 10

// MaxArtifact bounds an artifact's size.
const MaxArtifact = 64 << 20

const digestPrefix = "sha256:"

var digestRE = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// Digest is how an artifact is named: "sha256:" and the lower-case hex of
// the SHA-256 of its bytes.
func Digest(data []byte) string {
	sum := sha256.Sum256(data)
	return digestPrefix + hex.EncodeToString(sum[:])
}

// CheckDigest refuses what is not Digest's spelling.
func CheckDigest(d string) error {
	if !digestRE.MatchString(d) {
		return fmt.Errorf("%q is not a digest (want sha256:<64 lower-case hex digits>)", d)
	}
	return nil
}

var revisionRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckRevision refuses what cannot be a revision: letters, digits and
// . _ -, at most 64, starting with a letter or digit (a commit id, a tag).
func CheckRevision(r string) error {
	if !revisionRE.MatchString(r) {
		return fmt.Errorf("%q is not a revision (letters, digits and . _ -, at most 64, starting with a letter or digit)", r)
	}
	return nil
}

// SourceChange is a repository's announcement of a revision of a module.
type SourceChange struct {
	Repo     string    `json:"repo"`
	Module   string    `json:"module"`
	Revision string    `json:"revision"`
	At       time.Time `json:"at"`
}

// BuildRequest asks a builder to build Module at Revision of Repo. ID is
// the build's: the controller derives it from the three, so a change
// announced twice is one build.
type BuildRequest struct {
	ID       string    `json:"id"`
	Repo     string    `json:"repo"`
	Module   string    `json:"module"`
	Revision string    `json:"revision"`
	Asked    time.Time `json:"asked"`
}

// BuildID is the id of the build of module at revision of repo.
func BuildID(repo, module, revision string) string { return repo + "/" + module + "@" + revision }

// CONTROL recognises a duplicate by its message id across all its
// subjects, whoever published it: an id another principal can predict is
// one it can publish first, and the real message is then dropped as its
// duplicate (issue 18 §3: a host reporting with "changed:<build>" kept a
// revision from ever being built). So each kind of message about a build
// has an id of its own kind, keyed with a secret only its publisher holds
// (docs/decisions/0008-message-ids.md): the publisher's credential
// password. The same publisher sending the same message again (a retry,
// a builder killed after it said and its request built again by another
// builder with the same credential) gets the same id, which CONTROL's
// duplicate window makes one message. A request on BUILDS is the build's
// id itself: only the controller writes BUILDS.

// SourceChangeMsgID is the message id of a repository's announcement of
// build buildID, keyed with key, the repository's credential password.
func SourceChangeMsgID(key, buildID string) string { return keyedMsgID("changed", key, buildID) }

// BuiltMsgID is the message id of build buildID's outcome, keyed with
// key, the builder's credential password.
func BuiltMsgID(key, buildID string) string { return keyedMsgID("built", key, buildID) }

// keyedMsgID is "<kind>:<id>:<mac>", the mac an HMAC-SHA-256 of kind and
// id under key (128 bits of it): readable in a log, and unpredictable
// without key.
func keyedMsgID(kind, key, id string) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(kind + "\x00" + id))
	return kind + ":" + id + ":" + hex.EncodeToString(mac.Sum(nil)[:16])
}

// Build outcomes.
const (
	BuildSucceeded = "built"
	BuildFailed    = "failed"
)

// Built is a build's outcome. A build that succeeded names its artifact
// (Digest, Size, Chunks in ARTIFACTS); one that failed says why (Error).
type Built struct {
	ID       string    `json:"id"`
	Repo     string    `json:"repo"`
	Module   string    `json:"module"`
	Revision string    `json:"revision"`
	Outcome  string    `json:"outcome"`
	Digest   string    `json:"digest,omitempty"`
	Size     int64     `json:"size,omitempty"`
	Chunks   int       `json:"chunks,omitempty"`
	Error    string    `json:"error,omitempty"`
	Builder  string    `json:"builder"`
	At       time.Time `json:"at"`
}

// FetchRequest asks a repository for a revision of a module.
type FetchRequest struct {
	Module   string `json:"module"`
	Revision string `json:"revision"`
}

// FetchAnswer is a repository's answer: the revision's content, or why
// there is none (a revision it does not have).
type FetchAnswer struct {
	Module   string `json:"module"`
	Revision string `json:"revision"`
	Content  []byte `json:"content,omitempty"`
	Error    string `json:"error,omitempty"`
}

// ErrBuild is wrapped by every refusal of a build message's form.
var ErrBuild = errors.New("malformed build message")

// MaxBuildMessage bounds a build message (a fetch answer carries a
// revision's content and may be larger: MaxSourceContent).
const MaxBuildMessage = 4 << 10

// MaxSourceContent bounds a revision's content.
const MaxSourceContent = 512 << 10

func strict(data []byte, limit int, v any) error {
	if len(data) > limit {
		return fmt.Errorf("%w: %d bytes, more than %d", ErrBuild, len(data), limit)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrBuild, err)
	}
	if dec.More() {
		return fmt.Errorf("%w: more than one JSON value", ErrBuild)
	}
	return nil
}

func checkTriple(repo, module, revision string) error {
	if err := CheckName(repo); err != nil {
		return fmt.Errorf("%w: repo: %v", ErrBuild, err)
	}
	if err := CheckName(module); err != nil {
		return fmt.Errorf("%w: module: %v", ErrBuild, err)
	}
	if err := CheckRevision(revision); err != nil {
		return fmt.Errorf("%w: revision: %v", ErrBuild, err)
	}
	return nil
}

// ParseSourceChange reads an announcement strictly.
func ParseSourceChange(data []byte) (SourceChange, error) {
	var c SourceChange
	if err := strict(data, MaxBuildMessage, &c); err != nil {
		return SourceChange{}, err
	}
	return c, checkTriple(c.Repo, c.Module, c.Revision)
}

// ParseBuildRequest reads a build request strictly.
func ParseBuildRequest(data []byte) (BuildRequest, error) {
	var r BuildRequest
	if err := strict(data, MaxBuildMessage, &r); err != nil {
		return BuildRequest{}, err
	}
	if err := checkTriple(r.Repo, r.Module, r.Revision); err != nil {
		return BuildRequest{}, err
	}
	if r.ID != BuildID(r.Repo, r.Module, r.Revision) {
		return BuildRequest{}, fmt.Errorf("%w: id %q is not %q", ErrBuild, r.ID, BuildID(r.Repo, r.Module, r.Revision))
	}
	return r, nil
}

// ParseBuilt reads an outcome strictly: a success names a digest, a size
// and its chunks; a failure its reason.
func ParseBuilt(data []byte) (Built, error) {
	var b Built
	if err := strict(data, MaxBuildMessage, &b); err != nil {
		return Built{}, err
	}
	if err := checkTriple(b.Repo, b.Module, b.Revision); err != nil {
		return Built{}, err
	}
	if b.ID != BuildID(b.Repo, b.Module, b.Revision) {
		return Built{}, fmt.Errorf("%w: id %q is not %q", ErrBuild, b.ID, BuildID(b.Repo, b.Module, b.Revision))
	}
	switch b.Outcome {
	case BuildSucceeded:
		if err := CheckDigest(b.Digest); err != nil {
			return Built{}, fmt.Errorf("%w: digest: %v", ErrBuild, err)
		}
		if b.Size <= 0 || b.Size > MaxArtifact || b.Chunks != ChunksOf(b.Size) {
			return Built{}, fmt.Errorf("%w: size %d in %d chunks: want 1..%d bytes in chunks of %d", ErrBuild, b.Size, b.Chunks, MaxArtifact, ArtifactChunkSize)
		}
	case BuildFailed:
		if b.Error == "" {
			return Built{}, fmt.Errorf("%w: a failed build says why (error)", ErrBuild)
		}
	default:
		return Built{}, fmt.Errorf("%w: outcome %q is neither %q nor %q", ErrBuild, b.Outcome, BuildSucceeded, BuildFailed)
	}
	return b, nil
}

// ChunksOf is how many chunks an artifact of size bytes is stored in.
func ChunksOf(size int64) int { return int((size + ArtifactChunkSize - 1) / ArtifactChunkSize) }

// ParseFetchRequest reads a fetch request strictly.
func ParseFetchRequest(data []byte) (FetchRequest, error) {
	var r FetchRequest
	if err := strict(data, MaxBuildMessage, &r); err != nil {
		return FetchRequest{}, err
	}
	if err := CheckName(r.Module); err != nil {
		return FetchRequest{}, fmt.Errorf("%w: module: %v", ErrBuild, err)
	}
	if err := CheckRevision(r.Revision); err != nil {
		return FetchRequest{}, fmt.Errorf("%w: revision: %v", ErrBuild, err)
	}
	return r, nil
}

// ParseFetchAnswer reads a repository's answer strictly.
func ParseFetchAnswer(data []byte) (FetchAnswer, error) {
	var a FetchAnswer
	if err := strict(data, 2*MaxSourceContent, &a); err != nil {
		return FetchAnswer{}, err
	}
	if len(a.Content) > MaxSourceContent {
		return FetchAnswer{}, fmt.Errorf("%w: content of %d bytes, more than %d", ErrBuild, len(a.Content), MaxSourceContent)
	}
	if (a.Error == "") == (a.Content == nil) {
		return FetchAnswer{}, fmt.Errorf("%w: an answer holds the content or an error, one of them", ErrBuild)
	}
	return a, nil
}

// Marshal renders a build message for the wire.
func Marshal(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
