package images

// PostgresEntrypoint is where mesh-postgres keeps its entrypoint script.
const PostgresEntrypoint = "/usr/local/lib/mesh/postgres-entrypoint.sh"

// PostgresTemplate names the file that marks the image's data directory
// as its template: the cluster made at build time, which no container has
// started yet. It holds the user and database the cluster was made with.
const PostgresTemplate = "mesh-template"

// The user and database of the cluster mesh-postgres carries: a
// container run for them starts from it.
const (
	PostgresTemplateUser     = "mesh"
	PostgresTemplateDatabase = "mesh"
)

// postgresEntrypoint initialises the cluster at the first start and then
// runs postgres in the foreground, as PID 1 (exec), so that docker stop's
// signal reaches it.
//
// The user, password and database are named by whoever runs the
// container (POSTGRES_USER, POSTGRES_PASSWORD, POSTGRES_DB, as the
// official image reads them, so that image and ours are interchangeable
// under harness/postgres). initdb costs each container about 2
// core-seconds and as many seconds at its first start, through these
// machines' FUSE storage driver, so the image carries a cluster made at
// build time ("--template") for the default user and database, with no
// password, in the data directory: a new volume starts with a copy of
// it (Docker copies what the image has at a volume's path). The first
// start sets the container's own password, in single-user mode before
// the server listens, and removes the template's mark; until then no one
// can log in over the network (scram-sha-256 and no password), and a
// start killed halfway sets it again. A container run for another user
// or database, or whose data directory is bound from the host, makes its
// own cluster with initdb as before. Nothing secret is in the image: the
// template has no password, and every container's is its own.
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
mark="$PGDATA/` + PostgresTemplate + `"
say() { echo "mesh-postgres: $*" >&2; }
check_name() {
  case $2 in
    ''|*[!A-Za-z0-9_-]*) say "$1 '$2' must be letters, digits, _ and - only"; exit 2 ;;
  esac
}
# single runs the SQL on its standard input in single-user mode, before
# the server listens; $1 says what it does, for the error, which leaves
# out the statement (it may hold the password).
single() {
  out=$("$bin/postgres" --single -D "$PGDATA" postgres 2>&1) || {
    say "$1 failed: $(printf '%s\n' "$out" | grep -v STATEMENT)"; exit 1; }
  case $out in *ERROR*|*FATAL*) say "$1 failed: $(printf '%s\n' "$out" | grep -v STATEMENT)"; exit 1 ;; esac
}
# init makes the cluster, with the password in the file $1 if given.
init() {
  mkdir -p "$PGDATA"
  chmod 0700 "$PGDATA"
  "$bin/initdb" -D "$PGDATA" -U "$user" ${1:+--pwfile="$1"} --encoding=UTF8 --no-locale \
    --auth-local=trust --auth-host=scram-sha-256 >&2
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
    echo "CREATE DATABASE \"$db\" OWNER \"$user\"" | single "create database $db"
  fi
}
check_name POSTGRES_USER "$user"
check_name POSTGRES_DB "$db"
if [ "${1:-}" = --template ]; then
  # At build time: the cluster every container of the image starts from.
  init ""
  printf 'user=%s db=%s\n' "$user" "$db" >"$mark"
  say "made the template $PGDATA: user $user, database $db, no password"
  exit 0
fi
if [ -e "$mark" ] || [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    say "POSTGRES_PASSWORD must be set: the server is reached with password authentication (scram-sha-256)"
    exit 2
  fi
fi
if [ -e "$mark" ]; then
  if [ "$(cat "$mark")" = "user=$user db=$db" ]; then
    # The password as an SQL string: its quotes doubled.
    pw=$(printf '%s' "$POSTGRES_PASSWORD" | sed "s/'/''/g")
    printf 'ALTER ROLE "%s" PASSWORD '"'"'%s'"'"'\n' "$user" "$pw" | single "set the password of $user"
    rm "$mark"
    say "started from the image's cluster: user $user, database $db, the password given"
  else
    # Made for another user or database: not this container's. Without
    # PG_VERSION first, a start killed while emptying it starts afresh.
    rm -f "$PGDATA/PG_VERSION"
    find "$PGDATA" -mindepth 1 -delete
  fi
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  init "$pwfile"
  rm -f "$pwfile"
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
		Cmd: []string{"/bin/sh", PostgresEntrypoint},
		// The cluster a container starts from (postgresEntrypoint), made
		// for the default user and database of harness/postgres.Run, in
		// the data directory, so that a new volume starts with a copy.
		Prepare: []Command{{
			User: "postgres",
			Env:  []string{"PGDATA=/var/lib/postgresql/data", "POSTGRES_USER=" + PostgresTemplateUser, "POSTGRES_DB=" + PostgresTemplateDatabase},
			Args: []string{"/bin/sh", PostgresEntrypoint, "--template"},
		}},
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
