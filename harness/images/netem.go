package images

// Netem is mesh-netem: iproute2's tc and nftables from Debian's packages,
// the helper a link fault runs in a member's network namespace (with
// NET_ADMIN) to delay or drop that member's packets. It has no program of
// its own: each use runs one short script.
func Netem(d Debian) DebianSpec {
	return DebianSpec{
		Name:     "mesh-netem",
		Debian:   d,
		Packages: []string{"iproute2", "nftables"},
		Remove:   []string{"/usr/share/doc", "/usr/share/man", "/usr/share/info"},
		Env:      []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Cmd:      []string{"/bin/sh", "-c", "tc -V && nft -v"},
	}
}
