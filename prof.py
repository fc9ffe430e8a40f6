import cProfile, pstats, sys, time, torch
torch.set_num_threads(1)
from minitrainer.actor import TrainActor
from minitrainer.args import make_args
from minitrainer.parallel import parallel_state
from minitrainer.rollout import long_tailed_lengths, make_rollout_ref
refs = [make_rollout_ref(long_tailed_lengths(64, seed=s), seed=s) for s in range(4)]
with parallel_state(cp_size=2, cp_rank=1):
    actor = TrainActor(make_args(micro_batch_size=int(sys.argv[1])))
    actor.train(0, refs[0])
    pr = cProfile.Profile(); pr.enable()
    for i, ref in enumerate(refs[1:]):
        actor.train(i+1, ref)
    pr.disable()
st = pstats.Stats(pr); st.sort_stats("cumulative")
st.print_stats("layoutcheck", 30)
