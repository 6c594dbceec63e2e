package handshake

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// FaaS names of client.env.name.
const (
	envAWSLambda = "aws.lambda"
	envAzureFunc = "azure.func"
	envGCPFunc   = "gcp.func"
	envVercel    = "vercel"
)

// metadata holds the values of the client metadata document before it is
// encoded and, if need be, truncated.
type metadata struct {
	appName       string
	driverName    string
	driverVersion string
	osType        string
	osName        string
	osArch        string
	osVersion     string
	platform      string
	env           envInfo
}

// envInfo is client.env. Zero values are omitted.
type envInfo struct {
	name         string
	timeoutSec   *int32
	memoryMB     *int32
	region       string
	runtime      string // container.runtime
	orchestrator string // container.orchestrator
}

func (e envInfo) hasContainer() bool { return e.runtime != "" || e.orchestrator != "" }

func (e envInfo) empty() bool {
	return e.name == "" && e.timeoutSec == nil && e.memoryMB == nil && e.region == "" && !e.hasContainer()
}

// collectMetadata gathers the metadata values from opts and the environment.
func collectMetadata(opts Options) (*metadata, error) {
	getenv, exists, osName, osVersion := opts.Env.resolve()
	md := &metadata{
		appName:       opts.AppName,
		driverName:    DriverName,
		driverVersion: DriverVersion,
		osType:        runtime.GOOS,
		osName:        osName,
		osArch:        runtime.GOARCH,
		osVersion:     osVersion,
		platform:      runtime.Version() + " " + runtime.Compiler,
		env:           detectEnv(getenv, exists),
	}
	if md.osType == "" {
		md.osType = "unknown"
	}
	if err := appendDriverInfo(md, opts.DriverInfo); err != nil {
		return nil, err
	}
	return md, nil
}

// resolve fills in the defaults of e. The OS name and version come from
// /etc/os-release; with the default ReadFile that file is read once per
// process.
func (e Environment) resolve() (getenv func(string) string, exists func(string) bool, osName, osVersion string) {
	getenv, exists = e.Getenv, e.FileExists
	if getenv == nil {
		getenv = os.Getenv
	}
	if exists == nil {
		exists = fileExists
	}
	if e.ReadFile == nil {
		osName, osVersion = defaultOSRelease()
	} else {
		osName, osVersion = osRelease(e.ReadFile)
	}
	return getenv, exists, osName, osVersion
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

var defaultOSRelease = sync.OnceValues(func() (string, string) {
	return osRelease(os.ReadFile)
})

// osRelease returns the OS name and version: on Linux PRETTY_NAME (or NAME)
// and VERSION_ID of os-release(5); elsewhere, and when the file cannot be
// read, runtime.GOOS and no version.
func osRelease(readFile func(string) ([]byte, error)) (name, version string) {
	name = runtime.GOOS
	if runtime.GOOS != "linux" {
		return name, ""
	}
	var data []byte
	for _, path := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		b, err := readFile(path)
		if err == nil {
			data = b
			break
		}
	}
	if data == nil {
		return name, ""
	}
	vals := parseOSRelease(data)
	switch {
	case vals["PRETTY_NAME"] != "":
		name = vals["PRETTY_NAME"]
	case vals["NAME"] != "":
		name = vals["NAME"]
	}
	return name, vals["VERSION_ID"]
}

// parseOSRelease parses the KEY=value lines of os-release(5), with values
// optionally quoted. Only the first 64 KiB are looked at.
func parseOSRelease(data []byte) map[string]string {
	if len(data) > 64<<10 {
		data = data[:64<<10]
	}
	vals := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			q := v[0]
			v = v[1 : len(v)-1]
			if q == '"' {
				v = strings.NewReplacer(`\"`, `"`, `\\`, `\`, "\\$", "$", "\\`", "`").Replace(v)
			}
		}
		if utf8.ValidString(v) {
			vals[k] = v
		}
	}
	return vals
}

// FaaSName returns the name of the function-as-a-service platform the
// environment variables read by getenv say the client runs on, as the
// handshake's client.env.name gives it ("aws.lambda", "azure.func",
// "gcp.func", "vercel"), or "" when none, or more than one, is detected.
// Server monitors poll rather than stream on such platforms.
func FaaSName(getenv func(string) string) string {
	names := map[string]bool{}
	if strings.HasPrefix(getenv("AWS_EXECUTION_ENV"), "AWS_Lambda_") || getenv("AWS_LAMBDA_RUNTIME_API") != "" {
		names[envAWSLambda] = true
	}
	if getenv("FUNCTIONS_WORKER_RUNTIME") != "" {
		names[envAzureFunc] = true
	}
	if getenv("K_SERVICE") != "" || getenv("FUNCTION_NAME") != "" {
		names[envGCPFunc] = true
	}
	if getenv("VERCEL") != "" {
		names[envVercel] = true
		delete(names, envAWSLambda) // vercel takes precedence over aws.lambda
	}
	if len(names) != 1 {
		return ""
	}
	for n := range names {
		return n
	}
	return ""
}

// detectEnv fills client.env from the environment per the handshake
// specification's FaaS and container rules.
func detectEnv(getenv func(string) string, exists func(string) bool) envInfo {
	e := envInfo{name: FaaSName(getenv)}
	switch e.name {
	case envAWSLambda:
		e.region = getenv("AWS_REGION")
		e.memoryMB = envInt32(getenv, "AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
	case envGCPFunc:
		e.memoryMB = envInt32(getenv, "FUNCTION_MEMORY_MB")
		e.timeoutSec = envInt32(getenv, "FUNCTION_TIMEOUT_SEC")
		e.region = getenv("FUNCTION_REGION")
	case envVercel:
		e.region = getenv("VERCEL_REGION")
	}
	if exists("/.dockerenv") {
		e.runtime = "docker"
	}
	if getenv("KUBERNETES_SERVICE_HOST") != "" {
		e.orchestrator = "kubernetes"
	}
	return e
}

// envInt32 returns the variable as an int32, or nil when it is unset or not
// an int32.
func envInt32(getenv func(string) string, key string) *int32 {
	n, err := strconv.ParseInt(getenv(key), 10, 32)
	if err != nil {
		return nil
	}
	v := int32(n)
	return &v
}

// truncation says which of the specification's truncation steps apply.
type truncation struct {
	envNameOnly bool // 1. omit fields from env except env.name
	osTypeOnly  bool // 2. omit fields from os except os.type
	noEnv       bool // 3. omit the env document
	platformMax int  // 4. truncate platform to this many bytes; -1: no limit
}

// document builds the client document with the truncation t applied.
func (md *metadata) document(t truncation) bson.D {
	var doc bson.D
	if md.appName != "" {
		doc = append(doc, bson.E{Key: "application", Value: bson.D{{Key: "name", Value: md.appName}}})
	}
	doc = append(doc, bson.E{Key: "driver", Value: bson.D{
		{Key: "name", Value: md.driverName},
		{Key: "version", Value: md.driverVersion},
	}})

	osDoc := bson.D{{Key: "type", Value: md.osType}}
	if !t.osTypeOnly {
		if md.osName != "" {
			osDoc = append(osDoc, bson.E{Key: "name", Value: md.osName})
		}
		if md.osArch != "" {
			osDoc = append(osDoc, bson.E{Key: "architecture", Value: md.osArch})
		}
		if md.osVersion != "" {
			osDoc = append(osDoc, bson.E{Key: "version", Value: md.osVersion})
		}
	}
	doc = append(doc, bson.E{Key: "os", Value: osDoc})

	platform := md.platform
	if t.platformMax >= 0 && len(platform) > t.platformMax {
		platform = truncateUTF8(platform, t.platformMax)
	}
	if platform != "" {
		doc = append(doc, bson.E{Key: "platform", Value: platform})
	}

	if !t.noEnv {
		e := md.env
		if t.envNameOnly {
			e = envInfo{name: e.name}
		}
		if !e.empty() {
			var envDoc bson.D
			if e.name != "" {
				envDoc = append(envDoc, bson.E{Key: "name", Value: e.name})
			}
			if e.timeoutSec != nil {
				envDoc = append(envDoc, bson.E{Key: "timeout_sec", Value: *e.timeoutSec})
			}
			if e.memoryMB != nil {
				envDoc = append(envDoc, bson.E{Key: "memory_mb", Value: *e.memoryMB})
			}
			if e.region != "" {
				envDoc = append(envDoc, bson.E{Key: "region", Value: e.region})
			}
			if e.hasContainer() {
				var c bson.D
				if e.runtime != "" {
					c = append(c, bson.E{Key: "runtime", Value: e.runtime})
				}
				if e.orchestrator != "" {
					c = append(c, bson.E{Key: "orchestrator", Value: e.orchestrator})
				}
				envDoc = append(envDoc, bson.E{Key: "container", Value: c})
			}
			doc = append(doc, bson.E{Key: "env", Value: envDoc})
		}
	}
	return doc
}

// encode returns the client metadata document, applying the
// specification's truncation steps cumulatively, in order, until it fits in
// 512 bytes.
func (md *metadata) encode() (bson.Raw, error) {
	t := truncation{platformMax: -1}
	steps := []func(*truncation){
		func(t *truncation) { t.envNameOnly = true },
		func(t *truncation) { t.osTypeOnly = true },
		func(t *truncation) { t.noEnv = true },
	}
	for i := 0; ; i++ {
		b, err := bson.Marshal(md.document(t))
		if err != nil {
			return nil, fmt.Errorf("handshake: encoding the client metadata: %w", err)
		}
		if len(b) <= MaxClientMetadataBytes {
			return b, nil
		}
		if i < len(steps) {
			steps[i](&t)
			continue
		}
		if t.platformMax >= 0 {
			return nil, fmt.Errorf("%w (%d bytes without platform)", errMetadataTooLarge, len(b))
		}
		// 4. Truncate platform: by as many bytes as the document is
		// over the limit. If that leaves nothing, the field goes.
		over := len(b) - MaxClientMetadataBytes
		t.platformMax = max(len(md.platform)-over, 0)
	}
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
