package images

import (
	"slices"
	"strings"
	"testing"
)

func TestPostgresSpec(t *testing.T) {
	s := Postgres(Debian{})
	if err := s.check(); err != nil {
		t.Fatalf("check: %v", err)
	}
	got, err := s.changes(map[string]string{LabelImage: s.Name})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"USER postgres", "EXPOSE 5432/tcp", "ENV PGDATA=/var/lib/postgresql/data", `CMD ["/bin/sh","` + PostgresEntrypoint + `"]`} {
		if !slices.Contains(got, want) {
			t.Errorf("expected %q among the image's settings, got %q", want, got)
		}
	}
	if i := slices.IndexFunc(s.Files, func(f RootFile) bool { return f.Path == PostgresEntrypoint }); i < 0 {
		t.Fatalf("expected the entrypoint %s in the image's files", PostgresEntrypoint)
	}
	// The entrypoint reads the official image's variables, and ends in
	// the server itself (exec), so that docker stop reaches it.
	for _, want := range []string{"POSTGRES_USER", "POSTGRES_PASSWORD", "POSTGRES_DB", "scram-sha-256", "listen_addresses = '*'", `exec "$bin/postgres"`} {
		if !strings.Contains(postgresEntrypoint, want) {
			t.Errorf("expected the entrypoint to mention %q", want)
		}
	}
	// The cluster every container starts from is made at build time, for
	// the user and database named for it, and none other.
	if len(s.Prepare) != 1 || !slices.Equal(s.Prepare[0].Args, []string{"/bin/sh", PostgresEntrypoint, "--template"}) ||
		!slices.Contains(s.Prepare[0].Env, "POSTGRES_USER="+PostgresTemplateUser) || !slices.Contains(s.Prepare[0].Env, "POSTGRES_DB="+PostgresTemplateDatabase) {
		t.Errorf("expected the template made by the entrypoint for %s and %s, got %+v", PostgresTemplateUser, PostgresTemplateDatabase, s.Prepare)
	}
	d1, _ := debianDigest(s, "amd64", "")
	s.Files[0].Body += "# changed\n"
	if d2, _ := debianDigest(s, "amd64", ""); d1 == d2 {
		t.Errorf("expected a changed entrypoint to change the image's digest")
	}
}
