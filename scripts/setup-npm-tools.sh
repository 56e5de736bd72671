#!/usr/bin/env bash
# Installs the Node.js MCP tools the tests talk to into .npm-tools/ (gitignored), pinned:
#   @modelcontextprotocol/server-everything  - the reference server (sampling, elicitation,
#                                              roots, progress, resource links)
#   @modelcontextprotocol/inspector          - the official Inspector, used as `--cli`
#   @a2a-js/sdk                              - the official A2A JavaScript client (tests/test_a2a.py)
#   @ag-ui/client, esbuild                   - the AG-UI protocol's client, in Node and bundled
#                                              for Chromium (tests/test_agui_client.py, _browser.py)
# Idempotent: does nothing when the pinned versions are already installed. Offline-tolerant:
# if npm cannot install them, it says so and exits 0; the tests that need them then fail
# with a message naming this script (they never skip silently).
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/.npm-tools"
EVERYTHING_VERSION="2026.8.31"
INSPECTOR_VERSION="1.0.3"
A2A_JS_VERSION="1.3.0"
AGUI_VERSION="1.0.0"
ESBUILD_VERSION="0.28.2"
STAMP="$DIR/.installed-everything-$EVERYTHING_VERSION-inspector-$INSPECTOR_VERSION-a2a-$A2A_JS_VERSION"
STAMP="$STAMP-agui-$AGUI_VERSION-esbuild-$ESBUILD_VERSION"

if [ -f "$STAMP" ] && [ -x "$DIR/node_modules/.bin/mcp-server-everything" ] \
    && [ -x "$DIR/node_modules/.bin/mcp-inspector" ] \
    && [ -f "$DIR/node_modules/@a2a-js/sdk/package.json" ] \
    && [ -f "$DIR/node_modules/@ag-ui/client/package.json" ] \
    && [ -x "$DIR/node_modules/.bin/esbuild" ]; then
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    echo "setup-npm-tools: npm not found; MCP interop tests will fail" >&2
    exit 0
fi
mkdir -p "$DIR"
if [ ! -f "$DIR/package.json" ]; then
    printf '{\n  "name": "openmanus-npm-tools",\n  "private": true\n}\n' > "$DIR/package.json"
fi
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false
if npm install --prefix "$DIR" --save-exact --no-audit --no-fund --loglevel=error \
        "@modelcontextprotocol/server-everything@$EVERYTHING_VERSION" \
        "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" \
        "@a2a-js/sdk@$A2A_JS_VERSION" \
        "@ag-ui/client@$AGUI_VERSION" "esbuild@$ESBUILD_VERSION" >"$DIR/install.log" 2>&1; then
    rm -f "$DIR"/.installed-*
    touch "$STAMP"
else
    echo "setup-npm-tools: npm install failed (offline?); see $DIR/install.log." \
        "MCP interop tests will fail until it succeeds." >&2
fi
exit 0
