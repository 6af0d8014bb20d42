package images

// rabbitmqConf is the image's own rabbitmq.conf fragment, enough for the
// image to serve AMQP alone; harness/rabbitmq adds a later fragment with
// the users and definitions of a run. RabbitMQ reads every file of
// /etc/rabbitmq/conf.d in name order, as the official image does.
const rabbitmqConf = `# mesh-rabbitmq: AMQP on 5672, logs to the console for docker logs.
listeners.tcp.default = 5672
# The management API, through which the controller makes live changes
# (mesh/link/amqpadmin). Plain HTTP on the container's network only: the
# image does not EXPOSE it, and the harness publishes it to the host in
# the tests that ask for it alone.
management.tcp.port = 15672
# A broker for tests: guest may connect from other containers.
loopback_users.guest = false
log.console = true
log.console.level = info
log.file = false
`

// EnabledPlugins is the image's /etc/rabbitmq/enabled_plugins: the
// management plugin, and the event exchange, which publishes the broker's
// own record of every connection made, closed or refused on
// amq.rabbitmq.event (the beds read it: the broker lists only the
// connections still open).
const EnabledPlugins = "[rabbitmq_management,rabbitmq_event_exchange].\n"

// RabbitMQ is mesh-rabbitmq: RabbitMQ from Debian's rabbitmq-server
// package, for a machine that cannot pull the official image. It runs
// rabbitmq-server as the rabbitmq user in the foreground; the node name
// rabbit@localhost does not depend on the container's hostname, so a
// restarted or recreated container finds its data again.
func RabbitMQ(d Debian) DebianSpec {
	return DebianSpec{
		Name:     "mesh-rabbitmq",
		Debian:   d,
		Packages: []string{"rabbitmq-server"},
		Files: []RootFile{
			{Path: "/etc/rabbitmq/conf.d/10-mesh.conf", Body: rabbitmqConf},
			// Both plugins ship in rabbitmq-server; enabled here, offline,
			// they start with the node (the management port answers by the
			// time "Server startup complete" is logged).
			{Path: "/etc/rabbitmq/enabled_plugins", Body: EnabledPlugins},
		},
		// The plugins the two above need, and what the broker itself
		// needs (each application's "applications" in its .app file):
		// the other 42 would only be searched at every module the node
		// loads. The node boots in half the time and CPU (15.9 s and
		// 10.7 core-seconds on an idle 2-core machine → 7.9 s and 5.1),
		// and each rabbitmqctl is quicker too.
		Prune: []Prune{{
			Dir: "/usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins",
			Keep: []string{
				"rabbit", "rabbit_common", "rabbitmq_prelaunch",
				"rabbitmq_management", "rabbitmq_management_agent", "rabbitmq_web_dispatch",
				"rabbitmq_event_exchange", "amqp_client", "amqp10_common",
				"ra", "osiris", "aten", "gen_batch_server", "seshat",
				"ranch", "cowboy", "cowlib",
				"sysmon_handler", "stdout_formatter", "recon", "observer_cli",
				"syslog", "systemd", "enough", "jsx", "credentials_obfuscation",
				"cuttlefish", "getopt",
			},
		}},
		Remove: []string{
			"/usr/share/doc", "/usr/share/man", "/usr/share/info",
			// The package's postinst made a cookie at build time; one baked
			// into the image would be shared by every container of it.
			// Erlang makes a fresh one at first boot.
			"/var/lib/rabbitmq/.erlang.cookie",
		},
		Env: []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			// The Erlang cookie lives in HOME, for the server and for
			// rabbitmqctl run with docker exec.
			"HOME=/var/lib/rabbitmq",
			"RABBITMQ_NODENAME=rabbit@localhost",
			// Erlang and the Elixir CLI want a UTF-8 locale; C.UTF-8 is
			// built into glibc.
			"LANG=C.UTF-8",
		},
		User: "rabbitmq",
		// The script, not /usr/sbin/rabbitmq-server (a wrapper that
		// switches user with su): it traps SIGTERM and stops the node
		// cleanly, so docker stop is quick.
		Cmd:    []string{"/usr/lib/rabbitmq/bin/rabbitmq-server"},
		Expose: []string{"5672/tcp"},
	}
}
