"""Debian system libraries as Bazel targets, described by pkg-config.

`system_libs(name, libs)` creates an external repository with one cc_library
per entry of `libs` (target name -> list of pkg-config modules, or "-lfoo"
link flags for libraries that ship no .pc file). Headers live in /usr/include,
which the toolchain already searches, so only defines and link flags matter.
"""

def _pkg_config(ctx, flag, modules):
    result = ctx.execute(["pkg-config", flag] + modules)
    if result.return_code != 0:
        fail("pkg-config %s %s failed (install the Debian -dev packages with deploy/setup.sh): %s" %
             (flag, " ".join(modules), result.stderr))
    return [f for f in result.stdout.strip().replace("\n", " ").split(" ") if f]

def _dedup(items):
    seen = {}
    out = []
    for item in items:
        if item not in seen:
            seen[item] = True
            out.append(item)
    return out

def _system_libs_impl(ctx):
    build = ['package(default_visibility = ["//visibility:public"])', ""]
    for name, entries in ctx.attr.libs.items():
        modules = [e for e in entries if not e.startswith("-")]
        raw = [e for e in entries if e.startswith("-")]
        defines = []
        linkopts = []
        if modules:
            for flag in _pkg_config(ctx, "--cflags", modules):
                if flag.startswith("-D"):
                    defines.append(flag[2:])
            linkopts = _pkg_config(ctx, "--libs", modules)
        linkopts = _dedup(linkopts + raw)
        build.append("cc_library(")
        build.append("    name = %r," % name)
        build.append("    defines = %r," % _dedup(defines))
        build.append("    linkopts = %r," % linkopts)
        build.append(")")
        build.append("")
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)
    ctx.file("BUILD.bazel", "\n".join(build))

system_libs = repository_rule(
    implementation = _system_libs_impl,
    local = True,
    attrs = {"libs": attr.string_list_dict(mandatory = True)},
)

def _system_tools_impl(ctx):
    for tool in ctx.attr.tools:
        path = ctx.which(tool)
        if path == None:
            fail("%s not found (install it with deploy/setup.sh)" % tool)
        ctx.symlink(path, tool)
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)
    ctx.file("BUILD.bazel", 'package(default_visibility = ["//visibility:public"])\n' +
                            "exports_files(%r)\n" % ctx.attr.tools)

system_tools = repository_rule(
    implementation = _system_tools_impl,
    local = True,
    attrs = {"tools": attr.string_list(mandatory = True)},
)
