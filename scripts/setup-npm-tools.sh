#!/usr/bin/env bash
# Installs the Node.js MCP tools the tests talk to into .npm-tools/ (gitignored), pinned:
#   @modelcontextprotocol/server-everything  - the reference server (sampling, elicitation,
#                                              roots, progress, resource links)
#   @modelcontextprotocol/inspector          - the official Inspector, used as `--cli`
# Idempotent: does nothing when the pinned versions are already installed. Offline-tolerant:
# if npm cannot install them, it says so and exits 0; the tests that need them then fail
# with a message naming this script (they never skip silently).
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/.npm-tools"
EVERYTHING_VERSION="2026.8.31"
INSPECTOR_VERSION="1.0.3"
STAMP="$DIR/.installed-everything-$EVERYTHING_VERSION-inspector-$INSPECTOR_VERSION"

if [ -f "$STAMP" ] && [ -x "$DIR/node_modules/.bin/mcp-server-everything" ] \
    && [ -x "$DIR/node_modules/.bin/mcp-inspector" ]; then
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
        "@modelcontextprotocol/inspector@$INSPECTOR_VERSION" >"$DIR/install.log" 2>&1; then
    rm -f "$DIR"/.installed-*
    touch "$STAMP"
else
    echo "setup-npm-tools: npm install failed (offline?); see $DIR/install.log." \
        "MCP interop tests will fail until it succeeds." >&2
fi
exit 0
