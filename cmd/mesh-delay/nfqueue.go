package main

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// The few nfnetlink_queue messages mesh-delay speaks, encoded by hand.
// Where each number comes from (Linux uapi headers, include/uapi/linux/):
//
//   - netlink.h: the message header (struct nlmsghdr, 16 bytes, host byte
//     order), NLM_F_REQUEST 0x01, NLM_F_ACK 0x04, NLMSG_ERROR 0x2, the
//     attribute header (struct nlattr, 4 bytes, host byte order),
//     NLA_ALIGNTO 4, NLA_F_NESTED 1<<15, NLA_F_NET_BYTEORDER 1<<14.
//   - netfilter/nfnetlink.h: struct nfgenmsg (family, version, res_id in
//     network byte order; 4 bytes), NFNETLINK_V0 0, NFNL_SUBSYS_QUEUE 3;
//     a message's type is subsystem<<8 | message.
//   - netfilter/nfnetlink_queue.h: enum nfqnl_msg_types (PACKET 0,
//     VERDICT 1, CONFIG 2), enum nfqnl_attr_type (NFQA_PACKET_HDR 1,
//     NFQA_VERDICT_HDR 2), enum nfqnl_attr_config (NFQA_CFG_CMD 1,
//     NFQA_CFG_PARAMS 2, NFQA_CFG_QUEUE_MAXLEN 3), enum
//     nfqnl_msg_config_cmds (NFQNL_CFG_CMD_BIND 1), enum
//     nfqnl_config_mode (NFQNL_COPY_META 1), and the payloads: struct
//     nfqnl_msg_config_cmd {u8 command; u8 pad; be16 pf} (4 bytes),
//     struct nfqnl_msg_config_params {be32 copy_range; u8 copy_mode}
//     packed (5 bytes), struct nfqnl_msg_packet_hdr {be32 packet_id;
//     be16 hw_protocol; u8 hook} packed (7 bytes), struct
//     nfqnl_msg_verdict_hdr {be32 verdict; be32 id} (8 bytes);
//     NFQA_CFG_QUEUE_MAXLEN is a be32 (the kernel reads it with ntohl).
//   - netfilter.h: NF_ACCEPT 1.
//   - socket.h (AF_INET 2) and netlink.h (NETLINK_NETFILTER 12) come
//     through golang.org/x/sys/unix where the socket is made.
const (
	nlmsgHdrLen  = 16
	nfgenmsgLen  = 4
	nlaHdrLen    = 4
	nlmFRequest  = 0x01
	nlmFAck      = 0x04
	nlmsgError   = 0x2
	nlaTypeMask  = ^uint16(1<<15 | 1<<14)
	nfnetlinkV0  = 0
	subsysQueue  = 3
	msgPacket    = subsysQueue << 8 // | NFQNL_MSG_PACKET (0)
	msgVerdict   = subsysQueue<<8 | 1
	msgConfig    = subsysQueue<<8 | 2
	attrPktHdr   = 1
	attrVerdict  = 2
	cfgCmd       = 1
	cfgParams    = 2
	cfgMaxLen    = 3
	cmdBind      = 1
	copyMeta     = 1
	nfAccept     = 1
	afInet       = 2
	afUnspec     = 0
	pktHdrLen    = 7
	verdictHdLen = 8
)

// native is the byte order of netlink's own headers: the host's.
var native = binary.NativeEndian

// align rounds n up to netlink's 4-byte alignment (NLMSG_ALIGN, NLA_ALIGN).
func align(n int) int { return (n + 3) &^ 3 }

// message builds one netlink message of nfnetlink_queue for queue.
type message struct {
	b []byte
}

func newMessage(typ, flags uint16, seq uint32, queue uint16) *message {
	m := &message{b: make([]byte, nlmsgHdrLen+nfgenmsgLen, 64)}
	native.PutUint16(m.b[4:], typ)
	native.PutUint16(m.b[6:], flags)
	native.PutUint32(m.b[8:], seq)
	// nlmsg_pid 0: to the kernel. nfgenmsg: AF_UNSPEC, version 0, the
	// queue number in network byte order.
	m.b[16] = afUnspec
	m.b[17] = nfnetlinkV0
	binary.BigEndian.PutUint16(m.b[18:], queue)
	return m
}

// attr appends one attribute, padded to alignment.
func (m *message) attr(typ uint16, payload []byte) *message {
	start := len(m.b)
	m.b = append(m.b, make([]byte, align(nlaHdrLen+len(payload)))...)
	native.PutUint16(m.b[start:], uint16(nlaHdrLen+len(payload)))
	native.PutUint16(m.b[start+2:], typ)
	copy(m.b[start+nlaHdrLen:], payload)
	return m
}

// bytes sets the length and returns the message.
func (m *message) bytes() []byte {
	native.PutUint32(m.b[0:], uint32(len(m.b)))
	return m.b
}

// bindMessage binds queue to this socket, asks for packets' metadata only
// (the verdict needs nothing else) and caps what the kernel holds for us
// at maxlen packets; past that it drops, as netem does past its limit.
// It asks for an acknowledgement.
func bindMessage(seq uint32, queue uint16, maxlen uint32) []byte {
	cmd := []byte{cmdBind, 0, 0, 0}
	binary.BigEndian.PutUint16(cmd[2:], afInet) // pf: unused by BIND
	params := make([]byte, 5)
	binary.BigEndian.PutUint32(params, 0) // copy_range: none with META
	params[4] = copyMeta
	ml := binary.BigEndian.AppendUint32(nil, maxlen)
	return newMessage(msgConfig, nlmFRequest|nlmFAck, seq, queue).
		attr(cfgCmd, cmd).attr(cfgParams, params).attr(cfgMaxLen, ml).bytes()
}

// verdictMessage accepts the packet id of queue. No acknowledgement: a
// refused verdict still comes back as an NLMSG_ERROR.
func verdictMessage(seq uint32, queue uint16, id uint32) []byte {
	v := make([]byte, verdictHdLen)
	binary.BigEndian.PutUint32(v, nfAccept)
	binary.BigEndian.PutUint32(v[4:], id)
	return newMessage(msgVerdict, nlmFRequest, seq, queue).attr(attrVerdict, v).bytes()
}

// event is one message the kernel sent: a queued packet or an answer.
type event struct {
	// packet is true for NFQNL_MSG_PACKET; id is its packet id.
	packet bool
	id     uint32
	// ack is true for NLMSG_ERROR; errno is its error (0: an
	// acknowledgement), seq the request it answers.
	ack   bool
	errno int32
	seq   uint32
}

var errShort = errors.New("truncated netlink message")

// parse splits one datagram into its messages. Messages of other types
// are skipped.
func parse(b []byte) ([]event, error) {
	var out []event
	for len(b) >= nlmsgHdrLen {
		n := int(native.Uint32(b))
		if n < nlmsgHdrLen || n > len(b) {
			return out, fmt.Errorf("%w: length %d of %d bytes", errShort, n, len(b))
		}
		typ := native.Uint16(b[4:])
		body := b[nlmsgHdrLen:n]
		switch typ {
		case nlmsgError:
			// struct nlmsgerr: int error, then the request's header.
			if len(body) < 4+nlmsgHdrLen {
				return out, fmt.Errorf("%w: error message of %d bytes", errShort, len(body))
			}
			out = append(out, event{ack: true, errno: int32(native.Uint32(body)), seq: native.Uint32(body[4+8:])})
		case msgPacket:
			if len(body) < nfgenmsgLen {
				return out, fmt.Errorf("%w: packet message of %d bytes", errShort, len(body))
			}
			id, err := packetID(body[nfgenmsgLen:])
			if err != nil {
				return out, err
			}
			out = append(out, event{packet: true, id: id})
		}
		b = b[min(align(n), len(b)):]
	}
	return out, nil
}

// packetID finds NFQA_PACKET_HDR among a packet message's attributes.
func packetID(attrs []byte) (uint32, error) {
	for len(attrs) >= nlaHdrLen {
		n := int(native.Uint16(attrs))
		if n < nlaHdrLen || n > len(attrs) {
			return 0, fmt.Errorf("%w: attribute length %d of %d bytes", errShort, n, len(attrs))
		}
		if native.Uint16(attrs[2:])&nlaTypeMask == attrPktHdr {
			if n-nlaHdrLen < pktHdrLen {
				return 0, fmt.Errorf("%w: packet header of %d bytes", errShort, n-nlaHdrLen)
			}
			return binary.BigEndian.Uint32(attrs[nlaHdrLen:]), nil
		}
		attrs = attrs[min(align(n), len(attrs)):]
	}
	return 0, errors.New("packet message without NFQA_PACKET_HDR")
}
