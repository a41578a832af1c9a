"""The DRAM simulator (Pond §6.1): VMs placed on servers and pools as a cloud's scheduler places them, and the
DRAM a provider buys under each policy.

``packing`` places VMs on servers; ``pool_sim`` replays placements and pool draws; ``pool_fit`` sizes
local DRAM and pools from their peaks; ``sizing`` and ``sizing_report`` buy a fleet's DRAM per cluster and
report it beside all-local; ``trace`` reads and splits a trace's window for the workers; ``stranding`` and
``fixed_pools`` give Pond's model-free Fig. 2a and Fig. 3. ``evaluation.replay`` drives it with the nightly
policies' decisions.
"""
