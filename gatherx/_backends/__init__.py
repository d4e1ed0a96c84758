"""One module (or small package) per array framework, each a :class:`.base.Backend`."""
