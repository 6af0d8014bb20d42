//go:build amd64 || arm64

// The fixtures spell netlink's own headers (struct nlmsghdr, struct
// nlattr) in little-endian byte order: the host's on amd64 and arm64, the
// machines this runs on. The nfnetlink_queue payloads are in network
// byte order whatever the host (the uapi header declares them __be16 and
// __be32).

package main

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"syscall"
	"testing"
)

// fixture reads hex with blanks and comments (# to the end of the line).
func fixture(t *testing.T, s string) []byte {
	t.Helper()
	var clean strings.Builder
	for line := range strings.SplitSeq(s, "\n") {
		line, _, _ = strings.Cut(line, "#")
		clean.WriteString(strings.Join(strings.Fields(line), ""))
	}
	b, err := hex.DecodeString(clean.String())
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBindMessage(t *testing.T) {
	want := fixture(t, `
		30 00 00 00  # nlmsg_len 48
		02 03        # nlmsg_type NFNL_SUBSYS_QUEUE(3)<<8 | NFQNL_MSG_CONFIG(2)
		05 00        # nlmsg_flags NLM_F_REQUEST(1) | NLM_F_ACK(4)
		01 00 00 00  # nlmsg_seq 1
		00 00 00 00  # nlmsg_pid 0: the kernel
		00 00 00 07  # nfgenmsg: AF_UNSPEC, NFNETLINK_V0, res_id 7 (be16)
		08 00 01 00  # nlattr len 8, NFQA_CFG_CMD(1)
		01 00 00 02  #   nfqnl_msg_config_cmd: NFQNL_CFG_CMD_BIND(1), pad, pf AF_INET(2) be16
		09 00 02 00  # nlattr len 9, NFQA_CFG_PARAMS(2)
		00 00 00 00  #   copy_range 0 (be32)
		01 00 00 00  #   copy_mode NFQNL_COPY_META(1), then 3 bytes of padding
		08 00 03 00  # nlattr len 8, NFQA_CFG_QUEUE_MAXLEN(3)
		00 00 03 e8  #   1000 (be32)
	`)
	if got := bindMessage(1, 7, 1000); !bytes.Equal(got, want) {
		t.Fatalf("expected\n% x\ngot\n% x", want, got)
	}
}

func TestVerdictMessage(t *testing.T) {
	want := fixture(t, `
		20 00 00 00  # nlmsg_len 32
		01 03        # nlmsg_type NFNL_SUBSYS_QUEUE(3)<<8 | NFQNL_MSG_VERDICT(1)
		01 00        # nlmsg_flags NLM_F_REQUEST
		02 00 00 00  # nlmsg_seq 2
		00 00 00 00  # nlmsg_pid
		00 00 01 2c  # nfgenmsg: AF_UNSPEC, NFNETLINK_V0, res_id 300
		0c 00 02 00  # nlattr len 12, NFQA_VERDICT_HDR(2)
		00 00 00 01  #   verdict NF_ACCEPT(1) (be32)
		01 02 03 04  #   id (be32)
	`)
	if got := verdictMessage(2, 300, 0x01020304); !bytes.Equal(got, want) {
		t.Fatalf("expected\n% x\ngot\n% x", want, got)
	}
}

// A datagram as nfqnl_build_packet_message makes it in NFQNL_COPY_META
// (net/netfilter/nfnetlink_queue.c): the packet header first, then the
// devices, the mark and so on, no payload; here two of them, and an
// attribute ahead of the header in the second, which must be skipped.
const twoPackets = `
	30 00 00 00  # nlmsg_len 48
	00 03        # NFNL_SUBSYS_QUEUE<<8 | NFQNL_MSG_PACKET(0)
	00 00 00 00 00 00 00 00 00 00
	02 00 00 07  # nfgenmsg: AF_INET, NFNETLINK_V0, res_id 7
	0b 00 01 00  # nlattr len 11, NFQA_PACKET_HDR(1)
	00 00 00 2a  #   packet_id 42 (be32)
	08 00 03 00  #   hw_protocol ETH_P_IP (be16), hook NF_INET_LOCAL_OUT(3), padding
	08 00 05 00  # nlattr len 8, NFQA_IFINDEX_OUTDEV(5)
	00 00 00 0b  #   ifindex 11 (be32)
	08 00 03 00  # nlattr len 8, NFQA_MARK(3)
	00 00 00 00
	28 00 00 00  # nlmsg_len 40
	00 03 00 00 00 00 00 00 00 00 00 00
	02 00 00 07
	08 00 05 00  # NFQA_IFINDEX_OUTDEV first
	00 00 00 0b
	0b 00 01 00  # NFQA_PACKET_HDR
	ff ff ff fe  #   packet_id 4294967294
	08 00 03 00
`

// An acknowledgement of the bind (seq 1), and a refusal of it: struct
// nlmsgerr, the error (0, or -EBUSY = -16) then the request's header.
const answers = `
	24 00 00 00  # nlmsg_len 36
	02 00        # NLMSG_ERROR(2)
	00 01        # NLM_F_CAPPED: the request's payload left out
	01 00 00 00 d2 04 00 00
	00 00 00 00  # error 0: an acknowledgement
	30 00 00 00 02 03 05 00 01 00 00 00 00 00 00 00  # the request's header, seq 1
	24 00 00 00 02 00 00 01 01 00 00 00 d2 04 00 00
	f0 ff ff ff  # error -16
	30 00 00 00 02 03 05 00 01 00 00 00 00 00 00 00
`

func TestParse(t *testing.T) {
	evs, err := parse(fixture(t, twoPackets))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || !evs[0].packet || evs[0].id != 42 || !evs[1].packet || evs[1].id != 0xfffffffe {
		t.Fatalf("expected packets 42 and 4294967294, got %+v", evs)
	}
	evs, err = parse(fixture(t, answers))
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 2 || !evs[0].ack || evs[0].errno != 0 || evs[0].seq != 1 || !evs[1].ack || evs[1].seq != 1 {
		t.Fatalf("expected an acknowledgement and a refusal of seq 1, got %+v", evs)
	}
	if e := syscall.Errno(-evs[1].errno); e != syscall.EBUSY {
		t.Fatalf("expected EBUSY, got %v", e)
	}
}

func TestParseRefusesTruncated(t *testing.T) {
	whole := fixture(t, twoPackets)
	for name, b := range map[string][]byte{
		"message cut short":  whole[:40],
		"attribute overruns": append(append([]byte{}, whole[:20]...), 0x40, 0x00, 0x01, 0x00, 0, 0, 0, 0),
		"nfgenmsg cut":       fixture(t, `12 00 00 00 00 03 00 00 00 00 00 00 00 00 00 00  02 00`),
		"packet header cut":  fixture(t, `1c 00 00 00 00 03 00 00 00 00 00 00 00 00 00 00  02 00 00 07  08 00 01 00 00 00 00 2a`),
		"error too short":    fixture(t, `14 00 00 00 02 00 00 00 00 00 00 00 00 00 00 00  00 00 00 00`),
	} {
		// Fix up nlmsg_len where the test shortened the message itself.
		if name == "attribute overruns" {
			b[0] = byte(len(b))
		}
		if _, err := parse(b); !errors.Is(err, errShort) {
			t.Errorf("%s: expected errShort, got %v", name, err)
		}
	}
	noHdr := fixture(t, `
		1c 00 00 00 00 03 00 00 00 00 00 00 00 00 00 00
		02 00 00 07
		08 00 05 00 00 00 00 0b
	`)
	if _, err := parse(noHdr); err == nil || !strings.Contains(err.Error(), "NFQA_PACKET_HDR") {
		t.Errorf("a packet without its header: expected an error naming NFQA_PACKET_HDR, got %v", err)
	}
}
