package rollout

// What the package's external tests (which raise their state directories
// through controllertest, a layer up) reach of its inside.

// WithSyncDir is o fsyncing the directories it writes through sync.
func WithSyncDir(o Options, sync func(dir string) error) Options {
	o.syncDir = sync
	return o
}

var (
	SameDeclaration = sameDeclaration
	ComposedUsers   = composedUsers
	Composing       = composing
)

// Loaded waits until the server at monitor has full loaded.
var Loaded = loaded
