package images

// Netem is mesh-netem: the helper a link fault runs in a member's network
// namespace (with NET_ADMIN) to delay or drop that member's packets.
// Debian's packages give it iproute2's tc, nftables and iptables; our
// mesh-delay (/usr/local/bin) holds packets iptables queues to it
// (NFQUEUE), for kernels without the netem qdisc. Each use runs one short
// script, or mesh-delay for as long as a delay lasts.
func Netem(d Debian) DebianSpec {
	return DebianSpec{
		Name:     "mesh-netem",
		Debian:   d,
		Packages: []string{"iproute2", "nftables", "iptables"},
		Binaries: []Binary{{Package: module + "/cmd/mesh-delay", Name: "mesh-delay"}},
		Remove:   []string{"/usr/share/doc", "/usr/share/man", "/usr/share/info"},
		Env:      []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Cmd:      []string{"/bin/sh", "-c", "tc -V && nft -v && iptables -V"},
	}
}
