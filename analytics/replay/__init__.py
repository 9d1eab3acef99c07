"""Sessions through ``CompactionSession``, emitting the same events as a live agent.

``driver`` replays an imported session turn by turn; ``synthetic`` generates the seeded demo
sessions; ``counterfactual`` replays an emergency's lead-up under changed configs. Nothing here
opens the store: events go to a sink, the projector loads them.
"""
