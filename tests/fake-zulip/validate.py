"""Validates fake-zulip's responses against Zulip's OpenAPI spec.

Started once per test process by fake-zulip (src/validate.rs) with the
virtualenv in <workspace>/target/openapi-venv (openapi-core==0.19.5, the
version Zulip 10.2 pins). It prints "ready" once the spec is loaded, then
reads one JSON object per line on stdin,

    {"method": "get", "path": "/users/me", "status": 200, "body": {...}}

and answers one line per request: "ok", or "error: <reason>".

This is what Zulip's own test suite does
(zerver/openapi/openapi.py:validate_test_response): only 2xx responses are
checked (4xx bodies are documentation-grade in the spec), against the
unmodified spec loaded with OpenAPI.from_dict, through
validate_response(MockRequest("http://localhost:9991/", method,
"/api/v1" + path), MockResponse(body, status_code=status)).

Workarounds, and why none changes the verdict on a response:

* Zulip's spec writes "allOf: [base, {additionalProperties: false,
  properties: {...}}]" and repeats every property of the base in the second
  schema (as "{}" or "nullable: true"), so standard JSON Schema evaluation
  of allOf works with additionalProperties: false; openapi-core needs no
  help, and Zulip does not preprocess the spec it validates with (its
  naive allOf merge is only used for the documentation). A property that
  the base declares nullable must also say "nullable: true" in the second
  schema, or null fails there: the spec already does that, and a fake that
  sends null where the spec does not allow it is wrong.
* OpenAPI.from_dict normally also validates the spec document itself
  (openapi-spec-validator), which takes about 1.5 s. That check is about the
  spec, not about responses, and Zulip's CI runs it separately, so it is
  skipped here with Config(spec_validator_cls=None).
"""

import json
import sys


def reason_of(error):
    """One line naming the deepest schema error and where it is."""
    cause = error.__cause__ or error
    found = []

    def walk(err, depth):
        context = getattr(err, "context", None) or []
        if context:
            for sub in context:
                walk(sub, depth + 1)
        else:
            path = "/".join(str(p) for p in getattr(err, "absolute_path", []))
            found.append((len(path.split("/")) if path else 0, depth, err.message, path))

    schema_errors = getattr(cause, "schema_errors", None)
    if schema_errors:
        for err in schema_errors:
            walk(err, 0)
    if not found:
        return f"{type(error).__name__}: {error}".replace("\n", " ")[:2000]
    # The deepest location is usually the real mistake (a oneOf reports
    # every variant it tried, most failing on "type" near the top).
    deepest = max(f[0] for f in found)
    found = [f for f in found if f[0] == deepest]
    found.sort(key=lambda f: f[1])
    parts = []
    for _, _, message, path in found[:3]:
        parts.append(f"{message} at '{path or '/'}'")
    return f"{type(error).__name__}: " + "; ".join(parts).replace("\n", " ")[:2000]


def main():
    spec_path = sys.argv[1]
    try:
        import yaml
        from openapi_core import Config, OpenAPI
        from openapi_core.testing import MockRequest, MockResponse

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        with open(spec_path, "rb") as f:
            spec_dict = yaml.load(f, Loader=loader)
        spec = OpenAPI.from_dict(spec_dict, config=Config(spec_validator_cls=None))
    except Exception as e:  # noqa: BLE001 - reported to the Rust side
        print(f"fatal: {type(e).__name__}: {e}".replace("\n", " "), flush=True)
        return
    print("ready", flush=True)

    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            request = json.loads(line)
            status = int(request["status"])
            if not 200 <= status < 300:
                print("ok", flush=True)
                continue
            mock_request = MockRequest(
                "http://localhost:9991/", request["method"].lower(), "/api/v1" + request["path"]
            )
            mock_response = MockResponse(
                json.dumps(request["body"]).encode(), status_code=status
            )
            spec.validate_response(mock_request, mock_response)
            print("ok", flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is an answer
            print("error: " + reason_of(e), flush=True)


if __name__ == "__main__":
    main()
