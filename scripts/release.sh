#!/usr/bin/env bash
# Releases every module of fusebox at one version: the core module as
# vX.Y.Z, each nested module as FOLDER/vX.Y.Z (store/redisstore/v0.2.0, ...),
# which is how the Go module proxy finds a nested module's versions.
#
# Usage: scripts/release.sh [-n] vX.Y.Z
#   -n  dry run: check everything and print what would be done, change nothing
#
# The version is vMAJOR.MINOR.PATCH, or a prerelease such as v0.3.0-rc.1,
# with MAJOR 0 or 1 (v2 and later need a /v2 module path). It refuses a
# dirty work tree, and a tag that already exists. Then, in one commit, "release vX.Y.Z":
#   - every module's require line of another fusebox module moves to
#     vX.Y.Z, so that a consumer of a nested module gets the core (and the
#     nested modules it uses) at the same release;
#   - go.work replaces vX.Y.Z of each module, instead of the version before,
#     by its folder, so that the workspace still builds them together;
#   - CHANGELOG.md's "## Unreleased" heading becomes "## vX.Y.Z (date)".
# It checks that the workspace still resolves every package, commits if
# anything changed, and tags that commit for each module in dependency
# order: a module after every module it requires. It pushes nothing: it
# prints the push command.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

usage() { echo "usage: scripts/release.sh [-n] vX.Y.Z" >&2; exit 2; }

dry=false
if [ "${1:-}" = "-n" ]; then
	dry=true
	shift
fi
[ $# -eq 1 ] || usage
version=$1
if ! [[ $version =~ ^v[01]\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$ ]]; then
	echo "release: $version is not vMAJOR.MINOR.PATCH (or a prerelease, vMAJOR.MINOR.PATCH-rc.1) with MAJOR 0 or 1" >&2
	exit 2
fi

if [ -n "$(git status --porcelain)" ]; then
	echo "release: the work tree has changes; commit or stash them first:" >&2
	git status --short >&2
	exit 1
fi

# run prints a command; it also runs it unless this is a dry run.
run() {
	printf '+ %s\n' "$*"
	if ! $dry; then
		"$@"
	fi
}

# entries prints the entries of one directive (require, use, replace) of a
# go.mod or go.work file, one a line, whether in a block or not.
entries() {
	awk -v kw="$1" '
		$1 == kw && $2 == "(" { block = 1; next }
		block && $1 == ")" { block = 0; next }
		block && $1 !~ "^//" && NF > 0 { print; next }
		$1 == kw { $1 = ""; print }' "$2"
}

core=$(awk '$1 == "module" { print $2; exit }' go.mod)

# Every module of the workspace: its folder, its path, and the fusebox
# modules it requires.
declare -A dir_of requires_of
paths=()
for d in $(entries use go.work | awk '{ print $1 }'); do
	d=${d#./}
	d=${d:-.}
	p=$(awk '$1 == "module" { print $2; exit }' "$d/go.mod")
	dir_of[$p]=$d
	requires_of[$p]=$(entries require "$d/go.mod" | awk -v core="$core" '$1 == core || index($1, core "/") == 1 { print $1 }')
	paths+=("$p")
done

# tag_of is the tag of one module's release.
tag_of() {
	if [ "$1" = "$core" ]; then
		echo "$version"
	else
		echo "${dir_of[$1]}/$version"
	fi
}

# Dependency order: a module once every module it requires is placed.
order=()
declare -A placed
while [ "${#order[@]}" -lt "${#paths[@]}" ]; do
	progress=false
	for p in "${paths[@]}"; do
		[ -z "${placed[$p]:-}" ] || continue
		ready=true
		for r in ${requires_of[$p]}; do
			if [ -z "${dir_of[$r]:-}" ]; then
				echo "release: $p requires $r, which is not a module of go.work" >&2
				exit 1
			fi
			[ -n "${placed[$r]:-}" ] || ready=false
		done
		if $ready; then
			order+=("$p")
			placed[$p]=1
			progress=true
		fi
	done
	if ! $progress; then
		echo "release: the fusebox modules require one another in a cycle" >&2
		exit 1
	fi
done

for p in "${order[@]}"; do
	t=$(tag_of "$p")
	if git rev-parse -q --verify "refs/tags/$t" >/dev/null; then
		echo "release: tag $t already exists" >&2
		exit 1
	fi
done

echo "release $version of ${#order[@]} modules, in this order:"
for p in "${order[@]}"; do
	echo "  $(tag_of "$p")  ($p)"
done
echo

# The require lines and go.work's replacements.
for p in "${order[@]}"; do
	for r in ${requires_of[$p]}; do
		run go mod edit -require="$r@$version" "${dir_of[$p]}/go.mod"
	done
done
# go.work's replacements change version in place, keeping its layout and
# comments; a module without one gets one.
for p in "${order[@]}"; do
	old=$(entries replace go.work | awk -v p="$p" '$1 == p && $3 == "=>" { print $2; exit }')
	if [ -n "$old" ]; then
		re=$(printf '%s' "$p $old =>" | sed 's/[.]/\\./g')
		run sed -i "s#^\\(replace \\|[[:space:]]*\\)$re#\\1$p $version =>#" go.work
	else
		d=${dir_of[$p]}
		[ "$d" = "." ] && d="" # go.work writes the root as ./
		run go work edit -replace="$p@$version=./$d"
	fi
done
if grep -q '^## Unreleased$' CHANGELOG.md; then
	run sed -i "s/^## Unreleased\$/## $version ($(date -u +%Y-%m-%d))/" CHANGELOG.md
fi

# Every package of every module still resolves in the workspace.
echo "+ go list github.com/fusebox-go/fusebox/..."
if ! $dry; then
	go list github.com/fusebox-go/fusebox/... >/dev/null
fi

if $dry; then
	echo "+ git commit -am 'release $version'   (if anything changed)"
else
	if [ -n "$(git status --porcelain)" ]; then
		run git commit -q -am "release $version"
	fi
fi
for p in "${order[@]}"; do
	t=$(tag_of "$p")
	run git tag -a "$t" -m "$p $version"
done

tags=()
for p in "${order[@]}"; do
	tags+=("$(tag_of "$p")")
done
echo
if $dry; then
	echo "dry run: nothing was changed"
else
	echo "released $version; to publish it:"
fi
echo "  git push origin HEAD ${tags[*]}"
