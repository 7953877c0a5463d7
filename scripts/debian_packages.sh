#!/usr/bin/env bash
# Shared by the setup scripts: install the Debian packages that are missing, idempotently.
# Usage (sourced): install_debian_packages SCRIPT_NAME PACKAGE...
# Installs with apt-get as root; without root, exits 1 naming the packages to install.

install_debian_packages() {
  local script=$1
  shift
  local missing=() pkg
  for pkg in "$@"; do
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
      missing+=("$pkg")
    fi
  done
  ((${#missing[@]})) || return 0
  if [[ $(id -u) -ne 0 ]]; then
    echo "$script: need root to install ${missing[*]} (apt-get install ${missing[*]})" >&2
    exit 1
  fi
  echo "$script: installing ${missing[*]} (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
