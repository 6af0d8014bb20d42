package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/meshbus/mesh/mesh/wire"
)

// ControllerCredential is the controller's credential of user as st holds
// it: the store without a genesis says ErrNoGenesis, and a document that
// is no controller's is refused.
func ControllerCredential(ctx context.Context, st Store, user string) (wire.Credential, error) {
	data, err := st.Credential(ctx, user)
	if errors.Is(err, ErrNotFound) {
		return wire.Credential{}, fmt.Errorf("%w: read controller credential %s: %w", ErrNoGenesis, user, err)
	}
	if err != nil {
		return wire.Credential{}, fmt.Errorf("read controller credential %s: %w", user, err)
	}
	cred, err := wire.ParseCredential(data)
	if err != nil {
		return wire.Credential{}, fmt.Errorf("read controller credential %s: %w", user, err)
	}
	if cred.Principal != wire.PrincipalController {
		return wire.Credential{}, fmt.Errorf("read controller credential %s: principal is %q, expected %q", user, cred.Principal, wire.PrincipalController)
	}
	return cred, nil
}
