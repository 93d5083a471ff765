"""The composition root: each process built from its settings, its resources opened, run until stopped.

Settings become the services' config objects in :mod:`.configs` and nowhere
else. Every process opens its resources through one ``AsyncExitStack``
(:mod:`.resources`), so a failure half-way through start-up closes what was
already open, in reverse order, and a normal stop closes everything the same
way. Each process has its root: :mod:`.api`, :mod:`.worker`, :mod:`.projector`,
:mod:`.sweeper` and :mod:`.node`.
"""

# Nothing is re-exported here: importing one process's root (``voxlog.composition.worker``) must not load the
# others' (the API's web framework, the projector's), since every process pays for its imports at each start.
