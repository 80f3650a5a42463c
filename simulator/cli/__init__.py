"""The command line, `python -m simulator`: one module per subcommand (`predict`, `sweep`,
`validate`, `serve`, `columns`), what they share (`common`), and the parser that
dispatches them (`main`). `search` and `library` register their own subcommands
(`simulator.search.cli`, `library.cli`).

May import every other part of the simulator; nothing of the simulator imports it.
"""
