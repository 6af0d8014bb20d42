package wire

// Envelope headers (design 19 "The envelope"). The body is the event's
// JSON body alone.
const (
	HeaderEventID     = "x-event-id"
	HeaderSource      = "x-source"
	HeaderNode        = "x-node"
	HeaderTime        = "x-time"
	HeaderContentType = "content-type"
	HeaderCausationID = "x-causation-id"
	HeaderSchema      = "x-schema"

	// ContentTypeJSON is the only content type an event carries.
	ContentTypeJSON = "application/json"
)

// RequiredHeaders are the headers every event carries, in wire order.
var RequiredHeaders = []string{HeaderEventID, HeaderSource, HeaderNode, HeaderTime, HeaderContentType}

// OptionalHeaders are the headers an event may carry.
var OptionalHeaders = []string{HeaderCausationID, HeaderSchema}
