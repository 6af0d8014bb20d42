package images

// PostgresEntrypoint is where mesh-postgres keeps its entrypoint script.
const PostgresEntrypoint = "/usr/local/lib/mesh/postgres-entrypoint.sh"

// postgresEntrypoint initialises the cluster at the first start and then
// runs postgres in the foreground, as PID 1 (exec), so that docker stop's
// signal reaches it.
//
// initdb runs at the first start, not at build time, for three reasons:
// the user, password and database are named by whoever runs the
// container (POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB, as the
// official image reads them, so that image and ours are interchangeable
// under harness/postgres); a password or a cluster baked into an image
// would be shared by every container of it; and a data directory mounted
// from the host (PGDATA) is initialised where it lives. It costs about a
// second at a container's first start; a restarted container finds its
// cluster and skips it.
//
// The database other than postgres is made in single-user mode, before
// the server listens: a client that connects finds it there. Names are
// limited to what needs no quoting beyond double quotes.
const postgresEntrypoint = `#!/bin/sh
# mesh-postgres: initialise at the first start, then run postgres.
set -eu
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
PGDATA=${PGDATA:-/var/lib/postgresql/data}
user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
say() { echo "mesh-postgres: $*" >&2; }
check_name() {
  case $2 in
    ''|*[!A-Za-z0-9_-]*) say "$1 '$2' must be letters, digits, _ and - only"; exit 2 ;;
  esac
}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    say "POSTGRES_PASSWORD must be set: the server is reached with password authentication (scram-sha-256)"
    exit 2
  fi
  check_name POSTGRES_USER "$user"
  check_name POSTGRES_DB "$db"
  mkdir -p "$PGDATA"
  chmod 0700 "$PGDATA"
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  "$bin/initdb" -D "$PGDATA" -U "$user" --pwfile="$pwfile" --encoding=UTF8 --no-locale \
    --auth-local=trust --auth-host=scram-sha-256 >&2
  rm -f "$pwfile"
  # Password authentication from anywhere: the server is reached through
  # Docker's networks. The socket stays trusted, as in the official
  # image, for docker exec psql.
  cat >"$PGDATA/pg_hba.conf" <<'EOF'
local all all trust
host all all all scram-sha-256
EOF
  cat >>"$PGDATA/postgresql.conf" <<'EOF'
# mesh-postgres
listen_addresses = '*'
port = 5432
password_encryption = scram-sha-256
# /run/postgresql is not in the image (mmdebstrap empties /run) and
# only root could make it; PGHOST points psql here.
unix_socket_directories = '/tmp'
log_destination = 'stderr'
logging_collector = off
EOF
  if [ "$db" != postgres ]; then
    out=$(echo "CREATE DATABASE \"$db\" OWNER \"$user\"" | "$bin/postgres" --single -D "$PGDATA" postgres 2>&1) || {
      say "create database $db failed: $out"; exit 1; }
    case $out in *ERROR*|*FATAL*) say "create database $db failed: $out"; exit 1 ;; esac
  fi
  say "initialised $PGDATA: user $user, database $db"
fi
exec "$bin/postgres" -D "$PGDATA"
`

// Postgres is mesh-postgres: PostgreSQL from Debian's postgresql package
// (bookworm: 15), for a machine that cannot pull the official image. It
// runs postgres in the foreground as the postgres user, listening on 5432
// on every address with password authentication (scram-sha-256), and
// reads the official image's POSTGRES_USER, POSTGRES_PASSWORD (required)
// and POSTGRES_DB at its first start. It logs to stderr, for docker logs.
func Postgres(d Debian) DebianSpec {
	return DebianSpec{
		Name:     "mesh-postgres",
		Debian:   d,
		Packages: []string{"postgresql"},
		Files:    []RootFile{{Path: PostgresEntrypoint, Body: postgresEntrypoint}},
		Remove: []string{
			"/usr/share/doc", "/usr/share/man", "/usr/share/info",
			// The package's postinst made a cluster "main" at build time,
			// with a configuration the entrypoint does not use; every
			// container makes its own.
			"/etc/postgresql", "/var/lib/postgresql/15",
			// ssl-cert's postinst made a private key at build time: one
			// baked into the image would be every container's.
			"/etc/ssl/private/ssl-cert-snakeoil.key", "/etc/ssl/certs/ssl-cert-snakeoil.pem",
		},
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"PGDATA=/var/lib/postgresql/data",
			// The server's socket (postgresql.conf), for docker exec psql.
			"PGHOST=/tmp",
			"LANG=C.UTF-8",
		},
		User: "postgres",
		// docker stop's SIGTERM is postgres's smart shutdown, which waits
		// for every client to leave (a pool never does) until Docker kills
		// it; SIGINT is the fast one, the official image's STOPSIGNAL.
		// docker import refuses STOPSIGNAL (engine 20.10), so the container
		// is given it: harness/postgres.Run does, and by hand
		// docker run --stop-signal SIGINT.
		Cmd:    []string{"/bin/sh", PostgresEntrypoint},
		Expose: []string{"5432/tcp"},
		// The data directory's parent, which the package made the
		// postgres user's, so that a new volume is too: initdb and the
		// server write there, and through the container's layer on
		// fuse-overlayfs (these machines' storage driver) a start to
		// "ready" took 5.9 s, 1.9 core-seconds in the container and 2.5
		// in fuse-overlayfs; on a volume 2.9 s, 1.3 and 0.65. The
		// official image declares VOLUME /var/lib/postgresql/data.
		Volumes: []string{"/var/lib/postgresql"},
	}
}
