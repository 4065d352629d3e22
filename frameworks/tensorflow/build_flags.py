"""How tutti-tensorflow's op library is compiled: TensorFlow's own compile and link flags.

The plugin's own recipe, read by its setup.py (through tutti.common.build) and by Bazel's
`local_env` rule (through tutti.common.build_flags). flags() returns only what TensorFlow
needs; the flags every plugin shares are added by tutti.common.build_flags.
"""


def flags():
    import tensorflow as tf

    include_dirs, defines, cflags = [], [], []
    for flag in tf.sysconfig.get_compile_flags():
        if flag.startswith("-I"):
            include_dirs.append(flag[2:])
        elif flag.startswith("-D"):
            defines.append(flag[2:])
        elif "std=" not in flag:
            cflags.append(flag)
    library_dirs, libraries = [], []
    for flag in tf.sysconfig.get_link_flags():
        if flag.startswith("-L"):
            library_dirs.append(flag[2:])
        elif flag.startswith("-l"):
            libraries.append(flag[2:])
    return {
        "version": tf.__version__,
        "include_dirs": include_dirs,
        "defines": defines,
        "cflags": ["-std=c++17", "-Wno-deprecated-declarations", "-Wno-interference-size"]
        + cflags,
        "library_dirs": library_dirs,
        "libraries": libraries,
    }
