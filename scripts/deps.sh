#!/bin/sh
# scripts/deps.sh GROUP... - make sure the Debian packages a make target needs
# are installed.  As root it installs what is missing with apt-get; otherwise
# it prints the exact command to run and fails.
#
# Installing is never silent: before apt-get runs, the first line printed
# (for `make check` its first line of output) names the packages and says
# so; MESS_NO_APT=1 only lists them and fails, as for a non-root user.
#
# Groups: build (library and tools), check (tests), data (dataset generator),
#         bench (baselines), fuzz (fuzzers), python (bindings), eval,
#         text (the text set and its evaluation: docs/TEXT.md), wordnet
#         (the second text set: datasets/README.md), words (the
#         word-vector set: datasets/README.md),
#         deb (make deb: dpkg-buildpackage, lintian; docs/PACKAGING.md).
set -eu

pkgs_for() {
    case "$1" in
    build)  echo "build-essential pkg-config libsodium-dev libzstd-dev liblapack-dev libblas-dev" ;;
    check)  echo "build-essential pkg-config libsodium-dev libzstd-dev liblapack-dev libblas-dev python3 python3-numpy python3-distributed python3-dask python3-psutil" ;;
    data)   echo "python3 python3-numpy python3-opencv python3-skimage opencv-doc mate-backgrounds lomiri-wallpapers ukui-wallpapers sway-backgrounds plasma-workspace-wallpapers desktop-base gnome-backgrounds" ;;
    bench)  echo "python3 python3-numpy python3-faiss python3-hnswlib" ;;
    fuzz)   echo "clang libclang-rt-14-dev" ;;
    deb)    echo "build-essential pkg-config libsodium-dev libzstd-dev liblapack-dev libblas-dev debhelper dh-python pybuild-plugin-pyproject python3-all python3-setuptools python3-numpy lintian" ;;
    python) echo "python3 python3-numpy python3-distributed python3-dask python3-psutil" ;;
    eval)   echo "python3 python3-numpy python3-faiss python3-hnswlib python3-matplotlib" ;;
    text)   echo "python3 python3-numpy python3-scipy python3-hnswlib nodejs npm util-linux" ;;
    wordnet) echo "wordnet-base" ;;
    words)  echo "python3 python3-numpy fasttext dict-gcide dict-foldoc dict-jargon wordnet-base linux-doc-6.1 python3.11-doc perl-doc postgresql-doc-15" ;;
    *)      echo "deps.sh: unknown group '$1'" >&2; exit 2 ;;
    esac
}

want=""
for g in "$@"; do
    want="$want $(pkgs_for "$g")"
done

missing=""
if command -v dpkg-query >/dev/null 2>&1; then
    for p in $want; do
        case " $missing " in *" $p "*) continue ;; esac
        if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
            missing="$missing $p"
        fi
    done
else
    # Not Debian: check the libraries through pkg-config only.
    for lib in libsodium libzstd lapack blas; do
        pkg-config --exists "$lib" 2>/dev/null || missing="$missing $lib"
    done
    if [ -n "$missing" ]; then
        echo "libmess needs:$missing (install their development packages)" >&2
        exit 1
    fi
    exit 0
fi

[ -z "$missing" ] && exit 0

if [ "$(id -u)" -eq 0 ] && [ -z "${MESS_NO_APT:-}" ]; then
    echo "deps: running apt-get (as root) to install missing Debian packages:$missing (MESS_NO_APT=1 to only list them)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2 || apt-get update >&2
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >&2
else
    echo "Missing Debian packages:$missing" >&2
    echo "Install them with:  sudo apt-get install$missing" >&2
    exit 1
fi
