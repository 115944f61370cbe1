#!/usr/bin/env bash
# Print the shell command that follows a marker comment in README.md.
# Usage: scripts/readme-command.sh main-command|test-command
set -euo pipefail
marker="<!-- $1 -->"
awk -v m="$marker" '
  $0 == m { found = 1; next }
  found && /^```/ { if (inblock) exit; inblock = 1; next }
  found && inblock { print; exit }
' "$(dirname "$0")/../README.md"
