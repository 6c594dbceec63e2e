package handshake

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// fakeEnv is an Environment with the given variables and files; os-release
// is read from osRelease ("" for no such file).
func fakeEnv(vars map[string]string, files []string, osReleaseText string) Environment {
	return Environment{
		Getenv:     func(k string) string { return vars[k] },
		FileExists: func(p string) bool { return slices.Contains(files, p) },
		ReadFile: func(p string) ([]byte, error) {
			if osReleaseText == "" || p != "/etc/os-release" {
				return nil, os.ErrNotExist
			}
			return []byte(osReleaseText), nil
		},
	}
}

const ubuntu = `NAME="Ubuntu"
VERSION_ID="24.04"
PRETTY_NAME="Ubuntu 24.04.1 LTS"
# comment
ID=ubuntu
`

// command builds the command and returns it with its client document.
func command(t *testing.T, opts Options) (bson.Raw, bson.Raw) {
	t.Helper()
	cmd, err := Command(opts)
	if err != nil {
		t.Fatalf("Command: %v", err)
	}
	if err := cmd.Validate(); err != nil {
		t.Fatalf("Command gave invalid BSON: %v", err)
	}
	client, ok := cmd.Lookup("client").DocumentOK()
	if !ok {
		t.Fatalf("no client document in %s", cmd)
	}
	if len(client) > MaxClientMetadataBytes {
		t.Fatalf("client document is %d bytes: %s", len(client), client)
	}
	return cmd, client
}

func keys(t *testing.T, doc bson.Raw) []string {
	t.Helper()
	elems, err := doc.Elements()
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, e := range elems {
		ks = append(ks, e.Key())
	}
	return ks
}

func str(doc bson.Raw, path ...string) string {
	s, _ := doc.Lookup(path...).StringValueOK()
	return s
}

func has(doc bson.Raw, path ...string) bool {
	_, err := doc.LookupErr(path...)
	return err == nil
}

func TestCommandLegacyHello(t *testing.T) {
	cmd, _ := command(t, Options{Env: fakeEnv(nil, nil, "")})
	got := strings.Join(keys(t, cmd), ",")
	if want := "isMaster,helloOk,backpressure,client,compression,$db"; got != want {
		t.Errorf("keys = %s, want %s", got, want)
	}
	if v, _ := cmd.Lookup("isMaster").Int32OK(); v != 1 {
		t.Errorf("isMaster = %v", cmd.Lookup("isMaster"))
	}
	if b, ok := cmd.Lookup("helloOk").BooleanOK(); !ok || !b {
		t.Errorf("helloOk = %v", cmd.Lookup("helloOk"))
	}
	if s := str(cmd, "backpressure"); s != "2" || cmd.Lookup("backpressure").Type != bson.TypeString {
		t.Errorf("backpressure = %v, want the string \"2\"", cmd.Lookup("backpressure"))
	}
	if s := str(cmd, "$db"); s != "admin" {
		t.Errorf("$db = %q", s)
	}
	arr, ok := cmd.Lookup("compression").ArrayOK()
	if !ok {
		t.Fatalf("compression = %v, want an array", cmd.Lookup("compression"))
	}
	if vals, _ := arr.Values(); len(vals) != 0 {
		t.Errorf("compression = %v, want []", arr)
	}
}

func TestCommandLoadBalancedAndAuth(t *testing.T) {
	spec, _ := bson.Marshal(bson.D{{Key: "saslStart", Value: int32(1)}, {Key: "db", Value: "admin"}})
	cmd, _ := command(t, Options{
		LoadBalanced:            true,
		Compressors:             []string{"zstd", "lz4", "zlib", "zstd", "snappy"},
		SaslSupportedMechs:      "admin.alice",
		SpeculativeAuthenticate: spec,
		Env:                     fakeEnv(nil, nil, ""),
	})
	got := strings.Join(keys(t, cmd), ",")
	if want := "hello,helloOk,backpressure,loadBalanced,client,compression,saslSupportedMechs,speculativeAuthenticate,$db"; got != want {
		t.Errorf("keys = %s, want %s", got, want)
	}
	if b, _ := cmd.Lookup("loadBalanced").BooleanOK(); !b {
		t.Error("loadBalanced is not true")
	}
	if s := str(cmd, "saslSupportedMechs"); s != "admin.alice" {
		t.Errorf("saslSupportedMechs = %q", s)
	}
	if d, _ := cmd.Lookup("speculativeAuthenticate").DocumentOK(); !bytes.Equal(d, spec) {
		t.Errorf("speculativeAuthenticate = %s", d)
	}
	var comps []string
	vals, _ := cmd.Lookup("compression").Array().Values()
	for _, v := range vals {
		comps = append(comps, v.StringValue())
	}
	if got := strings.Join(comps, ","); got != "zstd,zlib,snappy" {
		t.Errorf("compression = %s, want zstd,zlib,snappy (unknown and repeated dropped)", got)
	}

	if _, err := Command(Options{SpeculativeAuthenticate: bson.Raw{1, 2, 3}, Env: fakeEnv(nil, nil, "")}); err == nil {
		t.Error("Command accepted a malformed speculativeAuthenticate")
	}
}

func TestMetadataContent(t *testing.T) {
	_, client := command(t, Options{AppName: "inventory", Env: fakeEnv(nil, nil, ubuntu)})
	if got := strings.Join(keys(t, client), ","); got != "application,driver,os,platform" {
		t.Errorf("client keys = %s (env must be omitted when empty)", got)
	}
	checks := map[string]string{
		"application.name": "inventory",
		"driver.name":      "mongopool",
		"driver.version":   DriverVersion,
		"os.type":          runtime.GOOS,
		"os.architecture":  runtime.GOARCH,
	}
	if runtime.GOOS == "linux" {
		checks["os.name"] = "Ubuntu 24.04.1 LTS"
		checks["os.version"] = "24.04"
	}
	for path, want := range checks {
		if got := str(client, strings.Split(path, ".")...); got != want {
			t.Errorf("%s = %q, want %q", path, got, want)
		}
	}
	if p := str(client, "platform"); !strings.HasPrefix(p, runtime.Version()) {
		t.Errorf("platform = %q, want it to start with %q", p, runtime.Version())
	}

	// No application document without an appName.
	_, client = command(t, Options{Env: fakeEnv(nil, nil, "")})
	if has(client, "application") {
		t.Errorf("application present without appName: %s", client)
	}
	if runtime.GOOS == "linux" {
		if got := str(client, "os", "name"); got != "linux" {
			t.Errorf("os.name without os-release = %q, want linux", got)
		}
		if has(client, "os", "version") {
			t.Error("os.version present without os-release")
		}
	}
}

func TestAppNameLimit(t *testing.T) {
	if _, err := Command(Options{AppName: strings.Repeat("a", 128), Env: fakeEnv(nil, nil, "")}); err != nil {
		t.Errorf("128-byte appName: %v", err)
	}
	_, err := Command(Options{AppName: strings.Repeat("a", 129), Env: fakeEnv(nil, nil, "")})
	if err == nil || !strings.Contains(err.Error(), "128") {
		t.Errorf("129-byte appName: err = %v", err)
	}
	// The limit is in bytes, not characters: 43 three-byte characters.
	if _, err := Command(Options{AppName: strings.Repeat("€", 43), Env: fakeEnv(nil, nil, "")}); err == nil {
		t.Error("129-byte (43-character) appName accepted")
	}
	if _, err := Command(Options{AppName: "bad\xff", Env: fakeEnv(nil, nil, "")}); err == nil {
		t.Error("invalid UTF-8 appName accepted")
	}
}

func TestDriverInfo(t *testing.T) {
	w := DriverInfo{Name: "odm", Version: "1.2", Platform: "cloud"}
	_, client := command(t, Options{
		DriverInfo: []DriverInfo{w, {}, w, {Name: "tool"}},
		Env:        fakeEnv(nil, nil, ""),
	})
	if got := str(client, "driver", "name"); got != "mongopool|odm|tool" {
		t.Errorf("driver.name = %q", got)
	}
	if got := str(client, "driver", "version"); got != DriverVersion+"|1.2" {
		t.Errorf("driver.version = %q", got)
	}
	if got := str(client, "platform"); !strings.HasSuffix(got, "|cloud") {
		t.Errorf("platform = %q", got)
	}
	for _, bad := range []DriverInfo{{Name: "a|b"}, {Version: "1|2"}, {Platform: "x|"}} {
		if _, err := Command(Options{DriverInfo: []DriverInfo{bad}, Env: fakeEnv(nil, nil, "")}); err == nil {
			t.Errorf("DriverInfo %+v with a delimiter accepted", bad)
		}
	}
}

func TestEnvDetection(t *testing.T) {
	type want struct {
		name, region, runtime, orchestrator string
		memory, timeout                     int32 // 0: absent
	}
	tests := []struct {
		desc  string
		vars  map[string]string
		files []string
		want  *want // nil: no env document
	}{
		{"nothing", nil, nil, nil},
		{"aws via AWS_EXECUTION_ENV", map[string]string{
			"AWS_EXECUTION_ENV": "AWS_Lambda_java8", "AWS_REGION": "us-east-2", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
		}, nil, &want{name: "aws.lambda", region: "us-east-2", memory: 1024}},
		{"AWS_EXECUTION_ENV without the Lambda prefix", map[string]string{
			"AWS_EXECUTION_ENV": "EC2", "AWS_REGION": "us-east-2",
		}, nil, nil},
		{"aws via AWS_LAMBDA_RUNTIME_API", map[string]string{"AWS_LAMBDA_RUNTIME_API": "127.0.0.1:9001"}, nil, &want{name: "aws.lambda"}},
		{"aws with a bad memory size", map[string]string{
			"AWS_EXECUTION_ENV": "AWS_Lambda_java8", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "big",
		}, nil, &want{name: "aws.lambda"}},
		{"aws with a memory size over int32", map[string]string{
			"AWS_EXECUTION_ENV": "AWS_Lambda_java8", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "2147483648",
		}, nil, &want{name: "aws.lambda"}},
		{"azure", map[string]string{"FUNCTIONS_WORKER_RUNTIME": "node", "AWS_REGION": "ignored"}, nil, &want{name: "azure.func"}},
		{"gcp via K_SERVICE", map[string]string{
			"K_SERVICE": "svc", "FUNCTION_MEMORY_MB": "1024", "FUNCTION_TIMEOUT_SEC": "60", "FUNCTION_REGION": "us-central1",
		}, nil, &want{name: "gcp.func", memory: 1024, timeout: 60, region: "us-central1"}},
		{"gcp via FUNCTION_NAME", map[string]string{"FUNCTION_NAME": "f", "FUNCTION_TIMEOUT_SEC": "x"}, nil, &want{name: "gcp.func"}},
		{"vercel", map[string]string{"VERCEL": "1", "VERCEL_REGION": "cdg1"}, nil, &want{name: "vercel", region: "cdg1"}},
		{"vercel over aws", map[string]string{
			"VERCEL": "1", "VERCEL_REGION": "cdg1", "AWS_EXECUTION_ENV": "AWS_Lambda_java8", "AWS_REGION": "us-east-2",
		}, nil, &want{name: "vercel", region: "cdg1"}},
		{"aws and azure: no FaaS", map[string]string{
			"AWS_EXECUTION_ENV": "AWS_Lambda_java8", "AWS_REGION": "us-east-2", "FUNCTIONS_WORKER_RUNTIME": "node",
		}, nil, nil},
		{"gcp and vercel: no FaaS", map[string]string{"K_SERVICE": "s", "VERCEL": "1"}, nil, nil},
		{"docker", nil, []string{"/.dockerenv"}, &want{runtime: "docker"}},
		{"kubernetes", map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, nil, &want{orchestrator: "kubernetes"}},
		{"FaaS and container", map[string]string{
			"FUNCTIONS_WORKER_RUNTIME": "node", "KUBERNETES_SERVICE_HOST": "10.0.0.1",
		}, []string{"/.dockerenv"}, &want{name: "azure.func", runtime: "docker", orchestrator: "kubernetes"}},
		{"conflicting FaaS with a container", map[string]string{
			"FUNCTIONS_WORKER_RUNTIME": "node", "K_SERVICE": "s",
		}, []string{"/.dockerenv"}, &want{runtime: "docker"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			_, client := command(t, Options{Env: fakeEnv(tt.vars, tt.files, "")})
			if tt.want == nil {
				if has(client, "env") {
					t.Fatalf("env present: %s", client.Lookup("env"))
				}
				return
			}
			env, ok := client.Lookup("env").DocumentOK()
			if !ok {
				t.Fatalf("no env document in %s", client)
			}
			w := tt.want
			strField := func(path []string, want string) {
				t.Helper()
				if want == "" {
					if has(env, path...) {
						t.Errorf("env.%s present: %s", strings.Join(path, "."), env)
					}
					return
				}
				if got := str(env, path...); got != want {
					t.Errorf("env.%s = %q, want %q", strings.Join(path, "."), got, want)
				}
			}
			intField := func(key string, want int32) {
				t.Helper()
				v, err := env.LookupErr(key)
				if want == 0 {
					if err == nil {
						t.Errorf("env.%s present: %s", key, env)
					}
					return
				}
				if got, ok := v.Int32OK(); !ok || got != want {
					t.Errorf("env.%s = %v, want int32 %d", key, v, want)
				}
			}
			strField([]string{"name"}, w.name)
			strField([]string{"region"}, w.region)
			strField([]string{"container", "runtime"}, w.runtime)
			strField([]string{"container", "orchestrator"}, w.orchestrator)
			intField("memory_mb", w.memory)
			intField("timeout_sec", w.timeout)
			if w.runtime == "" && w.orchestrator == "" && has(env, "container") {
				t.Errorf("empty container document present: %s", env)
			}
		})
	}
}

// TestTruncationOrder checks that the truncation steps of the handshake
// specification are applied cumulatively and in order: each case is
// oversized so that exactly the first n steps are needed.
func TestTruncationOrder(t *testing.T) {
	awsBase := map[string]string{
		"AWS_EXECUTION_ENV":               "AWS_Lambda_java8",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "1024",
		"KUBERNETES_SERVICE_HOST":         "h",
	}
	with := func(extra map[string]string) map[string]string {
		m := maps.Clone(awsBase)
		maps.Copy(m, extra)
		return m
	}
	longOS := "NAME=x\nPRETTY_NAME=" + strings.Repeat("L", 450) + "\nVERSION_ID=1\n"

	t.Run("fits: nothing omitted", func(t *testing.T) {
		_, c := command(t, Options{Env: fakeEnv(with(map[string]string{"AWS_REGION": "us-east-1"}), []string{"/.dockerenv"}, ubuntu)})
		for _, p := range [][]string{{"env", "region"}, {"env", "memory_mb"}, {"env", "container", "runtime"}, {"os", "architecture"}} {
			if !has(c, p...) {
				t.Errorf("%s omitted from a small document", strings.Join(p, "."))
			}
		}
	})

	t.Run("step 1: env fields but name omitted", func(t *testing.T) {
		_, c := command(t, Options{Env: fakeEnv(with(map[string]string{"AWS_REGION": strings.Repeat("r", 500)}), []string{"/.dockerenv"}, ubuntu)})
		env := c.Lookup("env").Document()
		if got := strings.Join(keys(t, env), ","); got != "name" {
			t.Errorf("env keys = %s, want name", got)
		}
		if str(env, "name") != "aws.lambda" {
			t.Errorf("env.name = %q", str(env, "name"))
		}
		// Step 2 was not needed.
		if !has(c, "os", "architecture") || (runtime.GOOS == "linux" && str(c, "os", "name") != "Ubuntu 24.04.1 LTS") {
			t.Errorf("os trimmed although step 1 was enough: %s", c.Lookup("os"))
		}
	})

	t.Run("step 2: os fields but type omitted", func(t *testing.T) {
		if runtime.GOOS != "linux" {
			t.Skip("os.name comes from os-release only on Linux")
		}
		_, c := command(t, Options{Env: fakeEnv(with(map[string]string{"AWS_REGION": strings.Repeat("r", 300)}), nil, longOS)})
		if got := strings.Join(keys(t, c.Lookup("os").Document()), ","); got != "type" {
			t.Errorf("os keys = %s, want type", got)
		}
		if got := strings.Join(keys(t, c.Lookup("env").Document()), ","); got != "name" {
			t.Errorf("env keys = %s, want name (step 3 not needed)", got)
		}
		if p := str(c, "platform"); !strings.HasPrefix(p, runtime.Version()) {
			t.Errorf("platform truncated although step 2 was enough: %q", p)
		}
	})

	// Steps 3 and 4 need a large platform, which only DriverInfo gives.
	// Calibrate its size so that omitting env is just enough (step 3), or
	// not enough (step 4).
	base := Options{Env: fakeEnv(with(nil), []string{"/.dockerenv"}, longOS)}
	md, err := collectMetadata(base)
	if err != nil {
		t.Fatal(err)
	}
	afterStep2 := size(t, md, truncation{envNameOnly: true, osTypeOnly: true, platformMax: -1})
	afterStep3 := size(t, md, truncation{envNameOnly: true, osTypeOnly: true, noEnv: true, platformMax: -1})
	if afterStep2 <= afterStep3 {
		t.Fatalf("env document takes no room: %d vs %d", afterStep2, afterStep3)
	}

	t.Run("step 3: env omitted", func(t *testing.T) {
		// Over the limit by one byte after step 2.
		pad := MaxClientMetadataBytes - afterStep2 + 1 - len("|")
		opts := base
		opts.DriverInfo = []DriverInfo{{Platform: strings.Repeat("p", pad)}}
		_, c := command(t, opts)
		if has(c, "env") {
			t.Errorf("env present: %s", c.Lookup("env"))
		}
		if got := strings.Join(keys(t, c.Lookup("os").Document()), ","); got != "type" {
			t.Errorf("os keys = %s, want type", got)
		}
		if p := str(c, "platform"); !strings.HasSuffix(p, "|"+strings.Repeat("p", pad)) {
			t.Errorf("platform truncated although step 3 was enough (%d bytes)", len(p))
		}
	})

	t.Run("step 4: platform truncated", func(t *testing.T) {
		over := 40
		pad := MaxClientMetadataBytes - afterStep3 + over - len("|")
		opts := base
		opts.DriverInfo = []DriverInfo{{Platform: strings.Repeat("p", pad)}}
		_, c := command(t, opts)
		if has(c, "env") {
			t.Errorf("env present: %s", c.Lookup("env"))
		}
		p := str(c, "platform")
		full := md.platform + "|" + strings.Repeat("p", pad)
		if len(p) != len(full)-over || !strings.HasPrefix(full, p) {
			t.Errorf("platform is %d bytes, want the first %d bytes of the full one", len(p), len(full)-over)
		}
		if len(c) != MaxClientMetadataBytes {
			t.Errorf("client is %d bytes, want exactly %d", len(c), MaxClientMetadataBytes)
		}
		if str(c, "driver", "name") != DriverName || str(c, "os", "type") != runtime.GOOS {
			t.Errorf("required fields changed: %s", c)
		}
	})

	t.Run("platform truncated on a character boundary", func(t *testing.T) {
		pad := (MaxClientMetadataBytes - afterStep3 + 40) / 3
		opts := base
		opts.DriverInfo = []DriverInfo{{Platform: strings.Repeat("€", pad)}}
		_, c := command(t, opts)
		p := str(c, "platform")
		if !strings.HasPrefix(p, md.platform) || !utf8.ValidString(p) {
			t.Errorf("platform %q is not a valid prefix", p)
		}
	})

	t.Run("too large even truncated", func(t *testing.T) {
		opts := base
		opts.DriverInfo = []DriverInfo{{Name: strings.Repeat("n", 600)}}
		_, err := Command(opts)
		if !errors.Is(err, errMetadataTooLarge) {
			t.Errorf("err = %v, want the metadata-too-large error", err)
		}
	})
}

func size(t *testing.T, md *metadata, tr truncation) int {
	t.Helper()
	b, err := bson.Marshal(md.document(tr))
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

func TestParseOSRelease(t *testing.T) {
	vals := parseOSRelease([]byte(`PRETTY_NAME="Debian GNU/Linux 13 (trixie)"
VERSION_ID='13'
NAME=Debian
QUOTED="a \"b\" \\c"
broken line
`))
	for k, want := range map[string]string{
		"PRETTY_NAME": "Debian GNU/Linux 13 (trixie)",
		"VERSION_ID":  "13",
		"NAME":        "Debian",
		"QUOTED":      `a "b" \c`,
	} {
		if vals[k] != want {
			t.Errorf("%s = %q, want %q", k, vals[k], want)
		}
	}
}
