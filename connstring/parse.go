package connstring

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mongopool/mongopool/internal/redact"
)

// Error is the error of a connection string that cannot be used. Its message
// never contains a secret.
type Error struct {
	// Option is the canonical name of the option at fault, or "" when the
	// error is not about one option (a malformed host, a bad user
	// information, a failed DNS look-up, ...).
	Option  string
	msg     string
	err     error
	hideErr bool // Error leaves err's text out (it may hold a secret, or repeat msg)
}

func (e *Error) Error() string {
	if e.err != nil && !e.hideErr {
		return "connstring: " + e.msg + ": " + e.err.Error()
	}
	return "connstring: " + e.msg
}

// Unwrap returns the wrapped error: ErrUnsupportedAuthMechanism, or the
// resolver's error of a failed look-up.
func (e *Error) Unwrap() error { return e.err }

// Parse parses a connection string. A "mongodb+srv" one is resolved with the
// system's DNS resolver (net.DefaultResolver), without a deadline of its own.
//
// Parse refuses the authentication mechanisms that mongopool does not
// implement (see ErrUnsupportedAuthMechanism).
func Parse(uri string) (*ConnString, error) {
	return ParseWithResolver(context.Background(), uri, nil)
}

// ParseWithResolver is Parse with a context, which bounds the DNS look-ups of
// a "mongodb+srv" connection string, and the resolver to use for them (nil
// means net.DefaultResolver). The resolver is not used for "mongodb".
func ParseWithResolver(ctx context.Context, uri string, r Resolver) (*ConnString, error) {
	if r == nil {
		r = net.DefaultResolver
	}
	return parse(ctx, uri, r, true)
}

// parse is the whole parse. With supportedOnly false it is the
// specification-level parse that the specification tests run: it accepts
// every mechanism of the Authentication specification. With supportedOnly
// true (Parse, ParseWithResolver) it also refuses the mechanisms that
// mongopool does not implement, before any DNS look-up.
func parse(ctx context.Context, uri string, r Resolver, supportedOnly bool) (*ConnString, error) {
	return new(parser).run(ctx, uri, r, supportedOnly)
}

func (p *parser) run(ctx context.Context, uri string, r Resolver, supportedOnly bool) (*ConnString, error) {
	p.counts = make(map[string]int)
	if err := p.parse(uri); err != nil {
		return nil, err
	}
	if err := p.validateOptions(); err != nil {
		return nil, err
	}
	if supportedOnly {
		if err := checkSupported(p.cs); err != nil {
			return nil, err
		}
	}
	if p.cs.srvHost {
		if err := p.resolveSRV(ctx, r); err != nil {
			return nil, err
		}
	}
	if err := p.validateResolved(); err != nil {
		return nil, err
	}
	p.cs.Warnings = p.warnings.result()
	return p.cs, nil
}

// checkSupported refuses the mechanisms that mongopool does not implement.
// They are valid for the specification, so the specification-level parse
// accepts them; a client that took them would only fail at its first
// connection, so Parse fails at once instead, naming the mechanism.
func checkSupported(c *ConnString) error {
	switch c.AuthMechanism {
	case MechGSSAPI, MechAWS, MechOIDC:
		return &Error{Option: "authMechanism",
			msg: fmt.Sprintf("authMechanism %s is not supported by mongopool (supported: %s, %s, %s, %s)",
				c.AuthMechanism, MechSCRAMSHA256, MechSCRAMSHA1, MechPLAIN, MechX509),
			err: ErrUnsupportedAuthMechanism, hideErr: true}
	}
	return nil
}

// Bounds of what a parse accepts and shows, so that no input makes an error
// or the warnings grow with it.
const (
	// maxURILength is the longest connection string accepted. Real ones are
	// well under a kilobyte; this leaves room for long host lists.
	maxURILength = 64 << 10
	// maxQuoted is the most of one value that a message quotes; a longer
	// value is cut, and the message tells its length.
	maxQuoted = 64
	// maxWarnings is the number of distinct warnings kept; one more tells
	// how many were left out. A repeated warning is kept once, with its
	// count.
	maxWarnings = 20
	// maxSecrets is the number of distinct secrets (raw and decoded) that
	// messages are checked against; with more, no message quotes a value.
	maxSecrets = 16
	// maxHostNameLength is the longest host name that DNS allows, and of
	// an IP literal with its zone.
	maxHostNameLength = 253
	// maxSocketPathLength is the longest Unix domain socket path, above the
	// 104 to 108 bytes that operating systems allow.
	maxSocketPathLength = 255
)

// parser holds the state of one parse.
type parser struct {
	cs *ConnString
	// quiet is set when the connection string has an "@" after its host
	// list. The user information ends at the first "/" or "?", so a password
	// with an unescaped "/" or "?" lands in the hosts, the database or the
	// options: messages then quote nothing from the connection string.
	quiet bool
	// secrets are the lower-cased secrets of the connection string (see
	// collectSecrets); tooManySecrets is set when it has more than
	// maxSecrets of them, and then no message quotes a value.
	secrets        []string
	tooManySecrets bool
	// guardFired records that a message withheld a value because it held a
	// secret (for the fuzz test).
	guardFired bool
	// suspectEnd is the offset of the last "@" of a suspect connection
	// string (see ConnString.suspect).
	suspectEnd int
	// scanned counts the bytes that quote compared with the secrets (for
	// the test that the parse stays linear).
	scanned   int
	warnings  warnings
	counts    map[string]int // instances of each option, by canonical name
	tlsValues []bool         // every valid tls and ssl value, in order
	// deprecated aliases, applied after the options when their replacement
	// is absent
	wtimeout          *time.Duration
	gssapiServiceName string
}

// show quotes a value from the connection string for a message, or
// withholds it in quiet mode and when it holds a secret (a user may well
// type the password where it does not belong).
func (p *parser) show(v string) string {
	if p.quiet {
		return "<withheld>"
	}
	return p.quote(v)
}

// showNumber shows a number parsed from the connection string, or withholds
// it like show.
func (p *parser) showNumber(n int) string {
	s := strconv.Itoa(n)
	if p.show(s) == "<withheld>" {
		return "<withheld>"
	}
	return s
}

// quote quotes a value for a message unless it holds a secret, compared
// case-insensitively (host names are lower-cased). Of a value longer than
// maxQuoted bytes, it quotes the beginning and tells the length.
func (p *parser) quote(v string) string {
	if p.tooManySecrets {
		p.guardFired = true
		return "<withheld>"
	}
	lower := asciiLower(v)
	p.scanned += len(v) * (1 + len(p.secrets))
	for _, s := range p.secrets {
		if strings.Contains(lower, s) {
			p.guardFired = true
			return "<withheld>"
		}
	}
	return quoteBounded(v)
}

// quoteBounded quotes v, or, when it is longer than maxQuoted bytes, its
// first maxQuoted bytes (fewer when that would cut a UTF-8 sequence)
// followed by "..." and the length of v.
func quoteBounded(v string) string {
	if len(v) <= maxQuoted {
		return strconv.Quote(v)
	}
	cut := maxQuoted
	for cut > maxQuoted-utf8.UTFMax && !utf8.RuneStart(v[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes)", strconv.Quote(v[:cut]), len(v))
}

// collectSecrets returns the secrets of a connection string, raw and
// decoded, lower-cased and without repeats: the password of the user
// information, the values of the secret options, and of
// authMechanismProperties the whole value and those of its properties that
// are not public (see secretValue). It runs before the parse, so that no
// message quotes them, even one about an earlier part. It does not need a
// valid connection string. It stops at more than maxSecrets secrets, and
// then reports false.
func collectSecrets(uri string) ([]string, bool) {
	var secrets []string
	seen := make(map[string]bool)
	addOne := func(s string) {
		if s = asciiLower(s); s != "" && !seen[s] && len(secrets) <= maxSecrets {
			seen[s] = true
			secrets = append(secrets, s)
		}
	}
	add := func(raw string) {
		addOne(raw)
		if dec, ok := pctDecode(raw); ok {
			addOne(dec)
		}
	}
	rest := uri
	if i := strings.Index(uri, "://"); i >= 0 {
		rest = uri[i+3:]
	}
	hostEnd := strings.IndexAny(rest, "/?")
	if hostEnd < 0 {
		hostEnd = len(rest)
	}
	if at := strings.LastIndexByte(rest[:hostEnd], '@'); at >= 0 {
		if _, pass, ok := strings.Cut(rest[:at], ":"); ok {
			add(pass)
		}
	}
	q := strings.IndexByte(rest[hostEnd:], '?')
	if q < 0 {
		return secrets, len(secrets) <= maxSecrets
	}
	for query := rest[hostEnd+q+1:]; query != "" && len(secrets) <= maxSecrets; {
		var pair string
		pair, query, _ = strings.Cut(query, "&")
		rawKey, rawValue, _ := strings.Cut(pair, "=")
		key, _ := pctDecode(rawKey)
		def := optionsByKey[asciiLower(key)]
		if def == nil {
			continue
		}
		value, ok := pctDecode(rawValue)
		if !ok || !secretValue(def, value) {
			continue
		}
		add(rawValue)
		if def.name == "authMechanismProperties" {
			for props := value; props != ""; {
				var prop string
				prop, props, _ = strings.Cut(props, ",")
				if name, v, ok := strings.Cut(prop, ":"); ok && !publicProperties[asciiUpper(name)] {
					add(v)
				}
			}
		}
	}
	return secrets, len(secrets) <= maxSecrets
}

// warnings are the warnings of one parse: at most maxWarnings distinct
// ones, in order, each with its count, and the count of those left out.
type warnings struct {
	list   []string
	counts []int
	index  map[string]int // position in list
	more   int
}

func (w *warnings) add(msg string) {
	if i, ok := w.index[msg]; ok {
		w.counts[i]++
		return
	}
	if len(w.list) == maxWarnings {
		w.more++
		return
	}
	if w.index == nil {
		w.index = make(map[string]int)
	}
	w.index[msg] = len(w.list)
	w.list = append(w.list, msg)
	w.counts = append(w.counts, 1)
}

// result returns the warnings for ConnString.Warnings: a repeated one with
// its count, and a last one telling how many were left out.
func (w *warnings) result() []string {
	if len(w.list) == 0 {
		return nil
	}
	out := make([]string, 0, len(w.list)+1)
	for i, msg := range w.list {
		if n := w.counts[i]; n > 1 {
			msg += fmt.Sprintf(" (%d times)", n)
		}
		out = append(out, msg)
	}
	if w.more > 0 {
		out = append(out, fmt.Sprintf("connstring: %d more warnings left out (at most %d distinct ones are kept)", w.more, maxWarnings))
	}
	return out
}

func (p *parser) warnf(format string, args ...any) {
	p.warnings.add("connstring: " + fmt.Sprintf(format, args...))
}

func (p *parser) errorf(option, format string, args ...any) error {
	return &Error{Option: option, msg: fmt.Sprintf(format, args...)}
}

func (p *parser) parse(uri string) error {
	if len(uri) > maxURILength {
		return &Error{msg: fmt.Sprintf("the connection string is %d bytes long; the limit is %d", len(uri), maxURILength)}
	}
	c := &ConnString{raw: uri, set: make(map[string]bool)}
	p.cs = c
	var ok bool
	p.secrets, ok = collectSecrets(uri)
	p.tooManySecrets = !ok
	var off int
	switch {
	case strings.HasPrefix(uri, SchemeMongoDB+"://"):
		c.Scheme, off = SchemeMongoDB, len(SchemeMongoDB)+3
	case strings.HasPrefix(uri, SchemeMongoDBSRV+"://"):
		c.Scheme, off = SchemeMongoDBSRV, len(SchemeMongoDBSRV)+3
		c.srvHost = true
	default:
		return p.schemeError(uri)
	}
	rest := uri[off:]

	// The host information ends at the first "/" or "?" (the slash before
	// the options may be left out).
	hostEnd := strings.IndexAny(rest, "/?")
	if hostEnd < 0 {
		hostEnd = len(rest)
	}
	lastAt := strings.LastIndexByte(rest, '@')
	p.quiet = lastAt > hostEnd
	hostInfo := rest[:hostEnd]
	hosts := hostInfo
	if at := strings.LastIndexByte(hostInfo, '@'); at >= 0 {
		if err := p.parseUserInfo(hostInfo[:at], off); err != nil {
			return err
		}
		hosts = hostInfo[at+1:]
	} else if p.quiet {
		// No user information, but an "@" further on: if the host list
		// has a colon, what follows it up to that "@" may be a password
		// with an unescaped "/" or "?". Redacted hides it.
		if colon := strings.IndexByte(hostInfo, ':'); colon >= 0 {
			c.redact = append(c.redact, redact.Span{Start: off + colon + 1, End: off + lastAt})
			c.suspect = true
			p.suspectEnd = off + lastAt
		}
	}
	if err := p.parseHosts(hosts); err != nil {
		return err
	}

	if hostEnd == len(rest) {
		return p.finishOptions()
	}
	tail := rest[hostEnd:]
	tailOff := off + hostEnd
	if tail[0] == '/' {
		path := tail[1:]
		if q := strings.IndexByte(path, '?'); q >= 0 {
			path = path[:q]
		}
		if err := p.parseDatabase(path); err != nil {
			return err
		}
		tailOff += 1 + len(path)
		tail = tail[1+len(path):]
	}
	if tail == "" {
		return p.finishOptions()
	}
	// tail starts with "?"
	if err := p.parseOptions(tail[1:], tailOff+1); err != nil {
		return err
	}
	return p.finishOptions()
}

// schemeError quotes the scheme only when it cannot hold anything else.
func (p *parser) schemeError(uri string) error {
	if uri == "" {
		return &Error{msg: "empty connection string"}
	}
	const want = `the scheme must be "mongodb" or "mongodb+srv"`
	i := strings.Index(uri, "://")
	if i < 0 {
		return &Error{msg: want + " (no scheme separator found)"}
	}
	scheme := uri[:i]
	if len(scheme) > 0 && len(scheme) <= 32 && strings.Trim(scheme, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-") == "" {
		if shown := p.quote(scheme); shown != "<withheld>" {
			return &Error{msg: fmt.Sprintf("%s, not %s", want, shown)}
		}
	}
	return &Error{msg: want}
}

// parseUserInfo parses "user[:password]" (still percent-encoded), which
// starts at offset off of the connection string. Its messages never quote
// it.
func (p *parser) parseUserInfo(ui string, off int) error {
	c := p.cs
	c.AuthConfigured = true
	c.hasUserInfo = true
	const encode = "the user name and password must be percent-encoded"
	if strings.IndexByte(ui, '@') >= 0 {
		return &Error{msg: encode + ": the user information has an unescaped at-sign"}
	}
	if strings.Count(ui, ":") > 1 {
		return &Error{msg: encode + ": the user information has more than one unescaped colon"}
	}
	for i := 0; i < len(ui); i++ {
		b := ui[i]
		switch {
		case b == '%':
			if i+2 >= len(ui) || !isHex(ui[i+1]) || !isHex(ui[i+2]) {
				return &Error{msg: encode + `: the user information has a "%" that does not start a percent-encoded byte`}
			}
		case b < 0x20 || b == 0x7f || strings.IndexByte(" \"#<>[\\]^`{|}", b) >= 0:
			return &Error{msg: encode + fmt.Sprintf(": the user information has the character %s", byteName(b))}
		}
	}
	user, pass, hasPass := strings.Cut(ui, ":")
	c.Username, _ = pctDecode(user)
	if hasPass {
		c.Password, _ = pctDecode(pass)
		c.PasswordSet = true
		start := off + len(user) + 1
		c.redact = append(c.redact, redact.Span{Start: start, End: start + len(pass)})
	}
	return nil
}

// byteName names a byte without echoing anything else.
func byteName(b byte) string {
	if b < 0x20 || b == 0x7f {
		return fmt.Sprintf("0x%02x", b)
	}
	return strconv.QuoteRune(rune(b))
}

func (p *parser) parseHosts(s string) error {
	c := p.cs
	if s == "" {
		return &Error{msg: "no host given"}
	}
	list := strings.Split(s, ",")
	if c.srvHost {
		if len(list) != 1 {
			return &Error{msg: "a mongodb+srv connection string must have exactly one host"}
		}
		return p.parseSRVHost(list[0])
	}
	for _, h := range list {
		addr, err := p.parseHost(h)
		if err != nil {
			return err
		}
		c.Hosts = append(c.Hosts, addr)
	}
	return nil
}

// parseHost parses one host of the list: "host[:port]", "[ipv6][:port]" or
// a percent-encoded Unix domain socket path ending in ".sock".
func (p *parser) parseHost(h string) (string, error) {
	if h == "" {
		return "", &Error{msg: "the host list has an empty host"}
	}
	if h[0] == '[' {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return "", &Error{msg: fmt.Sprintf("IP literal %s has no closing bracket", p.show(h))}
		}
		addr, ok := pctDecode(h[1:end])
		if !ok || !validIPv6(addr) {
			return "", &Error{msg: fmt.Sprintf("host %s is not a valid IPv6 literal", p.show(h))}
		}
		if len(addr) > maxHostNameLength {
			// A valid address with a long zone (an interface name).
			return "", &Error{msg: fmt.Sprintf("host %s has an IP literal of %d bytes; the limit is %d",
				p.show(h), len(addr), maxHostNameLength)}
		}
		port := DefaultPort
		if after := h[end+1:]; after != "" {
			if after[0] != ':' {
				return "", &Error{msg: fmt.Sprintf("host %s has characters after its IP literal", p.show(h))}
			}
			var err error
			if port, err = p.parsePort(h, after[1:]); err != nil {
				return "", err
			}
		}
		// The zone (an interface name) keeps its case.
		ip, zone, hasZone := strings.Cut(addr, "%")
		if hasZone {
			zone = "%" + zone
		}
		return "[" + asciiLower(ip) + zone + "]:" + strconv.Itoa(port), nil
	}
	dec, ok := pctDecode(h)
	if !ok {
		return "", &Error{msg: fmt.Sprintf("host %s has an invalid percent-encoding", p.show(h))}
	}
	if strings.IndexByte(dec, '/') >= 0 {
		if !strings.HasSuffix(dec, ".sock") {
			return "", &Error{msg: fmt.Sprintf("Unix domain socket %s must end in .sock", p.show(dec))}
		}
		if strings.IndexByte(dec, 0) >= 0 {
			return "", &Error{msg: fmt.Sprintf("Unix domain socket %s has a NUL byte", p.show(dec))}
		}
		if len(dec) > maxSocketPathLength {
			return "", &Error{msg: fmt.Sprintf("Unix domain socket %s has a path of %d bytes; the limit is %d",
				p.show(dec), len(dec), maxSocketPathLength)}
		}
		return dec, nil
	}
	name, portStr, hasPort := strings.Cut(h, ":")
	if strings.IndexByte(portStr, ':') >= 0 {
		return "", &Error{msg: fmt.Sprintf("host %s has more than one colon (IPv6 addresses go in brackets)", p.show(h))}
	}
	name, _ = pctDecode(name)
	if err := p.checkHostname(name, h); err != nil {
		return "", err
	}
	port := DefaultPort
	if hasPort {
		var err error
		if port, err = p.parsePort(h, portStr); err != nil {
			return "", err
		}
	}
	return asciiLower(name) + ":" + strconv.Itoa(port), nil
}

// checkHostname checks a decoded host name; h is the host as given, for the
// messages.
func (p *parser) checkHostname(name, h string) error {
	if name == "" {
		return &Error{msg: fmt.Sprintf("host %s has an empty host name", p.show(h))}
	}
	if len(name) > maxHostNameLength {
		return &Error{msg: fmt.Sprintf("host %s has a host name of %d bytes; the limit is %d",
			p.show(h), len(name), maxHostNameLength)}
	}
	for i := 0; i < len(name); i++ {
		b := name[i]
		if b <= 0x20 || b == 0x7f || strings.IndexByte("\"#%/:<>?@[\\]^`{|},", b) >= 0 {
			return &Error{msg: fmt.Sprintf("host %s has the character %s, not allowed in a host name", p.show(h), byteName(b))}
		}
	}
	return nil
}

func (p *parser) parsePort(h, s string) (int, error) {
	n := 0
	if s == "" || len(s) > 5 {
		n = -1
	}
	for i := 0; n >= 0 && i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			n = -1
			break
		}
		n = n*10 + int(s[i]-'0')
	}
	if n < 1 || n > 65535 {
		return 0, &Error{msg: fmt.Sprintf("host %s has an invalid port %s: it must be an integer from 1 to 65535", p.show(h), p.show(s))}
	}
	return n, nil
}

// parseSRVHost checks the single host of a "mongodb+srv" connection string:
// a host name without a port.
func (p *parser) parseSRVHost(h string) error {
	if h == "" {
		return &Error{msg: "no host given"}
	}
	if h[0] == '[' {
		return &Error{msg: "the host of a mongodb+srv connection string must be a host name, not an IP literal"}
	}
	if strings.IndexByte(h, ':') >= 0 {
		return &Error{msg: "the host of a mongodb+srv connection string must not have a port"}
	}
	name, ok := pctDecode(h)
	if !ok {
		return &Error{msg: fmt.Sprintf("host %s has an invalid percent-encoding", p.show(h))}
	}
	if strings.IndexByte(name, '/') >= 0 {
		return &Error{msg: "the host of a mongodb+srv connection string must be a host name, not a Unix domain socket"}
	}
	if err := p.checkHostname(name, h); err != nil {
		return err
	}
	name = strings.TrimSuffix(asciiLower(name), ".")
	if net.ParseIP(name) != nil {
		return &Error{msg: fmt.Sprintf("the host of a mongodb+srv connection string must be a host name, not the IP address %s", p.show(name))}
	}
	if name == "" || strings.HasPrefix(name, ".") || strings.Contains(name, "..") {
		return &Error{msg: fmt.Sprintf("host %s is not a valid host name", p.show(h))}
	}
	p.cs.SRVHost = name
	return nil
}

func (p *parser) parseDatabase(raw string) error {
	if raw == "" {
		return nil
	}
	if strings.IndexByte(raw, '@') >= 0 {
		// A database name may hold a percent-encoded "@", but an unescaped one
		// after the host list most likely ends a user information whose
		// password has an unescaped "/".
		return &Error{msg: "an unescaped at-sign follows the host list: percent-encode the user name and " +
			"password (and any at-sign in the database name)"}
	}
	db, ok := pctDecode(raw)
	if !ok {
		return &Error{msg: fmt.Sprintf("database name %s has an invalid percent-encoding", p.show(raw))}
	}
	if i := strings.IndexAny(db, "/\\ \"$\x00"); i >= 0 {
		return &Error{msg: fmt.Sprintf("database name %s has the character %s, which database names cannot have",
			p.show(db), byteName(db[i]))}
	}
	p.cs.Database = db
	return nil
}

// parseOptions parses "key=value&key=value..." (still percent-encoded),
// which starts at offset off of the connection string.
func (p *parser) parseOptions(s string, off int) error {
	for more := true; more; {
		var pair string
		pair, s, more = strings.Cut(s, "&")
		if pair != "" {
			if err := p.parseOption(pair, off); err != nil {
				return err
			}
		}
		off += len(pair) + 1
	}
	return nil
}

func (p *parser) parseOption(pair string, off int) error {
	rawKey, rawValue, hasValue := strings.Cut(pair, "=")
	key, ok := pctDecode(rawKey)
	if !ok {
		return &Error{msg: "an option name has an invalid percent-encoding"}
	}
	def := optionsByKey[asciiLower(key)]
	name := p.show(key)
	if def != nil {
		name = def.name
	}
	if !hasValue {
		return p.errorf(optionName(def), `option %s has no "=value"`, name)
	}
	if key == "" {
		return &Error{msg: "an option has an empty name"}
	}
	value, ok := pctDecode(rawValue)
	if !ok {
		return p.errorf(optionName(def), "the value of option %s has an invalid percent-encoding", name)
	}
	if def == nil {
		// It may be a misspelled secret option (pasword=, proxyPasswd=):
		// its value is not shown.
		p.redactValue(off+len(rawKey)+1, len(rawValue))
		p.warnf("unknown option %s ignored", name)
		return nil
	}
	if secretValue(def, value) {
		p.redactValue(off+len(rawKey)+1, len(rawValue))
	}
	return p.applyOption(def, value)
}

// redactValue makes Redacted hide the n bytes of an option value at offset
// start. When the value starts in the text that Redacted hides as a
// possible password (see ConnString.suspect), only the part up to that
// text's end is hidden: what follows its "@" is the host list.
func (p *parser) redactValue(start, n int) {
	end := start + n
	if p.cs.suspect && start < p.suspectEnd {
		end = min(end, p.suspectEnd)
	}
	if start < end {
		p.cs.redact = append(p.cs.redact, redact.Span{Start: start, End: end})
	}
}

// secretValue reports whether the value of an option is secret: that of a
// secret option, or an authMechanismProperties with a property that is not
// known to be public (AWS_SESSION_TOKEN, a misspelling of it, anything
// else), or that is not a list of NAME:value pairs.
func secretValue(def *optionDef, value string) bool {
	if def.secret {
		return true
	}
	if def.name != "authMechanismProperties" {
		return false
	}
	for value != "" {
		var prop string
		prop, value, _ = strings.Cut(value, ",")
		name, _, ok := strings.Cut(prop, ":")
		if !ok || !publicProperties[asciiUpper(name)] {
			return true
		}
	}
	return false
}

func optionName(def *optionDef) string {
	if def == nil {
		return ""
	}
	return def.name
}

// applyOption applies one instance of an option, from the connection string
// or a TXT record.
func (p *parser) applyOption(def *optionDef, value string) error {
	p.counts[def.name]++
	if p.counts[def.name] > 1 && !def.list {
		if def.onceOnly {
			return p.errorf(def.name, "option %s is given more than once", def.name)
		}
		p.warnf("option %s is given more than once; the last valid value is used", def.name)
	}
	if value == "" && !def.allowEmpty {
		p.warnf("option %s has an empty value and is ignored", def.name)
		return nil
	}
	err := def.apply(p, value)
	var iv *invalidValue
	switch {
	case err == nil:
		p.cs.set[asciiLower(def.setName())] = true
		return nil
	case errors.As(err, &iv):
		shown := p.show(value)
		if secretValue(def, value) {
			shown = "<redacted>"
		}
		p.warnf("invalid value %s for option %s ignored: %s", shown, def.name, iv.reason)
		return nil
	default:
		return err
	}
}

// finishOptions applies the deprecated aliases whose replacement is absent.
func (p *parser) finishOptions() error {
	c := p.cs
	if p.wtimeout != nil {
		if c.WTimeout != nil {
			p.warnf("deprecated option wtimeout ignored: wTimeoutMS is given")
		} else {
			p.warnf("option wtimeout is deprecated: use wTimeoutMS")
			c.WTimeout = p.wtimeout
		}
	}
	if p.gssapiServiceName != "" {
		if _, ok := c.AuthMechanismProperties["SERVICE_NAME"]; ok {
			p.warnf("deprecated option gssapiServiceName ignored: authMechanismProperties has SERVICE_NAME")
		} else {
			p.warnf("option gssapiServiceName is deprecated: use authMechanismProperties=SERVICE_NAME:name")
			if c.AuthMechanismProperties == nil {
				c.AuthMechanismProperties = make(map[string]string)
			}
			c.AuthMechanismProperties["SERVICE_NAME"] = p.gssapiServiceName
		}
	}
	return nil
}

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}

func unhex(b byte) byte {
	switch {
	case b <= '9':
		return b - '0'
	case b >= 'a':
		return b - 'a' + 10
	default:
		return b - 'A' + 10
	}
}

// pctDecode decodes %XX escapes ("+" stays "+"). It fails on a "%" that is
// not followed by two hexadecimal digits.
func pctDecode(s string) (string, bool) {
	i := strings.IndexByte(s, '%')
	if i < 0 {
		return s, true
	}
	b := make([]byte, 0, len(s))
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		if s[i] != '%' {
			b = append(b, s[i])
			continue
		}
		if i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]) {
			return "", false
		}
		b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
		i += 2
	}
	return string(b), true
}

// validIPv6 accepts an IPv6 address with an optional "%zone".
func validIPv6(s string) bool {
	addr, zone, hasZone := strings.Cut(s, "%")
	if hasZone && zone == "" {
		return false
	}
	for i := 0; i < len(zone); i++ {
		if zone[i] <= 0x20 || zone[i] == 0x7f {
			return false
		}
	}
	ip := net.ParseIP(addr)
	return ip != nil && strings.IndexByte(addr, ':') >= 0
}
