# The perplexity runs that compare the GPU runtime with the CPU runtime (sourced by
# bench/cuda/runtime_h200.sh, bench/cuda/cpu_spread.sh and bench/cuda/carry_parity.sh): every
# method with CUDA kernels, at 2 and 4 bits (turboquant_rvq: 1 and 2 bits per stage; vecinfer: its
# 4-bit values; kvquant_nuq at its default 3 bits; kitty at its defaults), and streaming_llm alone
# and over KIVI, on the project's models as MODEL:CHUNKS of WikiText-2 at context 2048. A calibrated spec's
# @CALIBRATION@ is the folder carry_parity.sh calibrates it into, per model.
parity_specs=(fp16 kivi:kbits=2,vbits=2 kivi:kbits=4,vbits=4 turboquant_mse:bits=4,vbits=4 turboquant_mse:bits=2,vbits=2
              turboquant_prod:bits=4,vbits=4 turboquant_prod:bits=2,vbits=2 turboquant_rvq:bits=1,vbits=1
              turboquant_rvq:bits=2,vbits=2 qjl:vbits=2 qjl:vbits=4 vecinfer:vbits=4,artifacts=@CALIBRATION@
              kvquant_nuq:bits=3,artifacts=@CALIBRATION@ streaming_llm:budget=256 streaming_llm:budget=256+kivi:kbits=2,vbits=2
              kitty)
parity_models=(vq-hd128:8 vq-hd64:2)
