package rollout

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/meshbus/mesh/mesh/atomicfile"
	"github.com/meshbus/mesh/mesh/compose"
	"github.com/meshbus/mesh/mesh/controller/store"
	"github.com/meshbus/mesh/mesh/meshdesc"
)

// passwordBytes is the entropy of a minted password: 192 bits, which a
// bcrypt hash leaking out of nats.conf cannot be brute-forced back from.
const passwordBytes = 24

// DefaultBcryptCost is the cost of the password hashes: bcrypt's least.
// Every password is 192 random bits, which no hash cost makes any harder
// to guess (stretching protects passwords people choose), while
// nats-server pays the cost on every connection and, on every reload,
// once per connected client: at bcrypt's default of 10 a reload of a
// mesh with 500 clients took about 37 s of the server's CPU, at 4 about
// 0.6 s (docs/decisions/0004-bcrypt-cost.md).
const DefaultBcryptCost = bcrypt.MinCost

// Options tune genesis and apply.
type Options struct {
	// BcryptCost is the cost of the password hashes; default
	// DefaultBcryptCost.
	BcryptCost int
	// Server overrides where the composed configuration puts the server's
	// files and listeners (its Hashes are ignored). The zero value is the
	// container's layout: /etc/nats, /data, the description's ports. Apply
	// must be given the same overrides genesis was, since nats-server
	// cannot reload a listener or store change.
	Server compose.Inputs
	// Now is the clock certificates are dated by; default time.Now.
	Now func() time.Time
	// Logger receives what changed; default discards.
	Logger *slog.Logger
	// SpentTokenGrace is how long a spent token's user stays composed,
	// and an unspent one's after its expiry; default
	// controller.SpentTokenGrace.
	SpentTokenGrace time.Duration
	// TokenGrace is the grace each token issued is given, kept with it
	// (store.Token.Grace); SpentTokenGrace when zero.
	TokenGrace time.Duration
	// LedgerPruneEvery is how often the CONTROL loop prunes its ledger;
	// default LedgerPruneEvery.
	LedgerPruneEvery time.Duration
	// TokenScanEvery is how often the CONTROL loop reads the tokens to
	// revoke each at its expiry (one issued by another process too);
	// default TokenScanEvery.
	TokenScanEvery time.Duration
	// Bus is the bus genesis puts the mesh's own traffic on; default NATS.
	// Every composition after follows the store (MeshBus).
	Bus Bus
	// AMQPAdmin reaches the broker's management API, to make a
	// composition live on a mesh on AMQP.
	AMQPAdmin AMQPAdmin
	// AMQPClients counts the compatibility broker's clients through it
	// (ObserveCompat).
	AMQPClients AMQPClients
	// AMQPRetire removes the mesh's side of the broker through it, once a
	// cutover moved the mesh off (RetireAMQP).
	AMQPRetire AMQPRetire

	// syncDir fsyncs a directory after entries in it were created, renamed
	// or removed; default the real one. A test records the calls.
	syncDir func(dir string) error
}

// WithDefaults is o with every option left zero set to its default.
func (o Options) WithDefaults() Options {
	if o.BcryptCost == 0 {
		o.BcryptCost = DefaultBcryptCost
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SpentTokenGrace == 0 {
		o.SpentTokenGrace = store.SpentTokenGrace
	}
	if o.TokenGrace == 0 {
		o.TokenGrace = o.SpentTokenGrace
	}
	if o.LedgerPruneEvery == 0 {
		o.LedgerPruneEvery = LedgerPruneEvery
	}
	if o.TokenScanEvery == 0 {
		o.TokenScanEvery = TokenScanEvery
	}
	if o.Bus == "" {
		o.Bus = NATS
	}
	if o.syncDir == nil {
		o.syncDir = atomicfile.SyncDir
	}
	return o
}

// MintSecret draws a password from crypto/rand and hashes it; only the
// hash goes into the server's configuration.
func MintSecret(cost int) (store.Secret, error) {
	raw := make([]byte, passwordBytes)
	if _, err := rand.Read(raw); err != nil {
		return store.Secret{}, fmt.Errorf("mint password: %w", err)
	}
	// URL-safe alphabet: the password travels in the credential's URL.
	pw := base64.RawURLEncoding.EncodeToString(raw)
	hash, err := bcrypt.GenerateFromPassword([]byte(pw), cost)
	if err != nil {
		return store.Secret{}, fmt.Errorf("hash password: %w", err)
	}
	return store.Secret{Password: pw, Hash: string(hash)}, nil
}

// composeConfig renders nats.conf from the description and the hashes.
func composeConfig(m *meshdesc.Mesh, secrets store.Secrets, o Options) ([]byte, error) {
	in := o.Server
	in.Hashes = secrets.Hashes()
	return compose.Config(m, in)
}

// LedgerPruneEvery is how often the loop prunes the ledger by default.
const LedgerPruneEvery = 10 * time.Second
