// Package expr is the expression language of billrun's local Google Cloud
// Workflows engine: the text inside `${…}`, its values, its runtime errors and
// the non-blocking standard library, following Google's published reference
// (syntax/expressions, syntax/datatypes, stdlib/*).
//
// Values are plain Go: nil, bool, int64, float64, string, []byte, []any,
// map[string]any and FuncRef. Parse turns text into an *Expr; Eval runs it
// against an Env (variables, plus functions and constants from a Registry such
// as NewStdlib returns). Runtime errors are *Error, whose Map is Google's error
// map ({"message", "tags", …}).
//
// Where Google leaves a behaviour undocumented, this package chooses, and the
// choice is made in one place, named here:
//
//   - Only a whole "${…}" scalar is an expression; Workflows does no
//     interpolation, so "a ${b}" is the literal string it reads as; syntax
//     error offsets count from the expression text, after "${" (ParseValue).
//   - String literals are double-quoted with JSON escapes; map literal keys are
//     string literals; a trailing comma is a syntax error (parser).
//   - Precedence follows Google's table literally, so `not` binds tighter than
//     comparisons: write `not (k in m)` (binaryPrec).
//   - `and`/`or` short-circuit (Google's samples guard `"k" in m and m.k …`
//     with it); both operands must be booleans (logical).
//   - `==`/`!=` compare any two values (unrelated types are unequal); `<` etc.
//     order numbers, strings and booleans and raise TypeError otherwise
//     (Equal, compare).
//   - Overflow is a ValueError, for integers (+ - * // unary -, math.abs) and
//     for doubles (a finite operation giving an infinity); `%` takes the
//     divisor's sign, so a == (a//b)*b + a%b (arith, intArith).
//   - List indexes must be integers in [0, len): no negative indexes (index).
//   - A variable shadows a module name; a name that is neither a variable nor
//     a registered constant or function raises KeyError at run time (the
//     engine rejects it at deploy time through Vars/Refs) (evaluator.path).
//   - Doubles print as the shortest decimal that reads back exactly, integral
//     ones without a fraction (Google shows time.parse's double result as
//     1715169660), with an exponent beyond 1e21 / below 1e-6 (FormatDouble);
//     map keys are sorted by keys() and by JSON encoding (sortedKeys,
//     EncodeJSON); null counts 8 bytes in SizeOf.
//   - A raised string reaches `except: as:` unchanged (Error.Value).
//   - Functions accept only the argument types their page documents, anything
//     else is a TypeError (len of bytes, base64.encode of a string) (argErr).
//   - No expression length limit is enforced: Google's quotas page names one,
//     but its value could not be checked (maxDepth only bounds nesting).
//   - text.url_decode turns "+" into a space; int("1.5") is a ValueError;
//     int() of a double truncates toward zero (percentDecode, toInt).
package expr
