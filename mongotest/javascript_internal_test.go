package mongotest

import "testing"

// TestJSFunctionSource checks that code becomes a function as mongod's
// parseJSFunctionOrExpression makes it (src/mongo/scripting/mozjs): a
// function stays one; the last expression statement is returned; a bare
// return makes a body; trailing semicolons go.
func TestJSFunctionSource(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"function() { return 1 }", "function() { return 1 }"},
		{"  function (a) { return a }; ;", "function (a) { return a }"},
		{"function named() { return 1 }", "function named() { return 1 }"},
		{"this.x > 1", "function() {return this.x > 1\n}"},
		{"(this.a == 1)", "function() {return (this.a == 1)\n}"},
		{"((this.a == 1))", "function() {return ((this.a == 1))\n}"},
		{"var y = 2; y == 2;", "function() {var y = 2; return y == 2\n}"},
		{"var y = 2;\n(y == 2)", "function() {var y = 2;\nreturn (y == 2)\n}"},
		{"return this.x", "function() {return this.x\n}"},
		{"if (this.x) { true }", "function() {if (this.x) { true }\n}"},
		{"this.x // a comment", "function() {return this.x // a comment\n}"},
	} {
		got, err := functionSource(tc.src)
		if err != nil || got != tc.want {
			t.Errorf("functionSource(%q) = %q, %v; want %q", tc.src, got, err, tc.want)
		}
	}
	for _, src := range []string{"", ";", "this.x ==", "function( {"} {
		if got, err := functionSource(src); err == nil {
			t.Errorf("functionSource(%q) = %q; want an error", src, got)
		}
	}
}
