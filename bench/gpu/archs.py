"""bench/gpu's helper: real architectures, from their configs, as
transformers builds them, written as a model dir the worker checks.

archs.py OUT: for each architecture below, builds the model on the meta
device (nothing is allocated or downloaded), writes OUT/<name>/config.json
and a model.safetensors whose header holds every parameter's name, dtype
and shape (named_parameters: tied weights once, as save_pretrained
saves), its data a hole; and OUT/<name>/transformers.json: transformers'
own parameter count, bytes and dtypes. Adds a PEFT adapter dir (when peft
is installed) and a model with auto_map. Prints OUT/report.json's path.
With --peak (and a GPU): also the peak memory of one batch-1 pass over
2,000 tokens for phi-2 in float32 and float16 and the verdict of
mlrb-peak-memory on a GPT-2 of 1,024 positions.
"""
import json
import os
import struct
import subprocess
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM

ST_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}

ARCHS = {
    "phi-2": ("float16", dict(model_type="phi", num_hidden_layers=32, hidden_size=2560, intermediate_size=10240, num_attention_heads=32,
                              num_key_value_heads=32, vocab_size=51200, max_position_embeddings=2048)),
    "llama-3-8b": ("bfloat16", dict(model_type="llama", num_hidden_layers=32, hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                                    num_key_value_heads=8, vocab_size=128256, max_position_embeddings=8192)),
    "mistral-7b": ("bfloat16", dict(model_type="mistral", num_hidden_layers=32, hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                                    num_key_value_heads=8, vocab_size=32000, max_position_embeddings=32768)),
    "qwen2-0.5b": ("bfloat16", dict(model_type="qwen2", num_hidden_layers=24, hidden_size=896, intermediate_size=4864, num_attention_heads=14,
                                    num_key_value_heads=2, vocab_size=151936, max_position_embeddings=32768, tie_word_embeddings=True)),
    "gpt2": ("float32", dict(model_type="gpt2", n_layer=12, n_embd=768, n_head=12, n_positions=1024, vocab_size=50257)),
    "flan-t5-base": ("float32", dict(model_type="t5", is_encoder_decoder=True, num_layers=12, num_decoder_layers=12, d_model=768, d_ff=2048, d_kv=64,
                                     num_heads=12, vocab_size=32128, feed_forward_proj="gated-gelu", tie_word_embeddings=False)),
}


def build(cfg_fields, dtype):
    fields = dict(cfg_fields)
    cfg = AutoConfig.for_model(fields.pop("model_type"), **fields)
    cls = AutoModelForSeq2SeqLM if cfg.is_encoder_decoder else AutoModelForCausalLM
    with torch.device("meta"):
        model = cls.from_config(cfg, dtype=getattr(torch, dtype))
    return cfg, model


def write_sparse(path, named):
    """A safetensors file of these tensors' headers, its data a hole."""
    header, off = {}, 0
    for name, t in named:
        n = t.numel() * t.element_size()
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        f.truncate(8 + len(h) + off)


def save(out, name, cfg, model, extra_config=None):
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    cfg.save_pretrained(d)
    if extra_config:
        with open(os.path.join(d, "config.json"), encoding="utf-8") as f:
            c = json.load(f)
        c.update(extra_config)
        with open(os.path.join(d, "config.json"), "w", encoding="utf-8") as f:
            json.dump(c, f)
    named = list(model.named_parameters())
    write_sparse(os.path.join(d, "model.safetensors"), named)
    dtypes = {}
    for _, t in named:
        k = str(t.dtype).replace("torch.", "")
        dtypes[k] = dtypes.get(k, 0) + t.numel()
    facts = {"params": model.num_parameters(), "bytes": sum(t.numel() * t.element_size() for _, t in named), "dtypes": dtypes,
             "tensors": {n: list(t.shape) for n, t in named}}
    with open(os.path.join(d, "transformers.json"), "w", encoding="utf-8") as f:
        json.dump(facts, f)
    return d


def peak(out):
    """Peak GPU memory of one batch-1 pass over 2,000 tokens, phi-2 from
    its config (random weights: memory does not depend on them)."""
    res = {"device": torch.cuda.get_device_name(0)}
    for dtype in ("float32", "float16"):
        cfg = AutoConfig.for_model(**ARCHS["phi-2"][1])
        model = AutoModelForCausalLM.from_config(cfg, dtype=getattr(torch, dtype)).to("cuda").eval()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        ids = torch.randint(0, cfg.vocab_size, (1, 2000), device="cuda")
        with torch.no_grad():
            model(input_ids=ids, use_cache=True)
        torch.cuda.synchronize()
        res["phi-2 " + dtype] = torch.cuda.max_memory_allocated()
        del model
        torch.cuda.empty_cache()
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(here, "..", "..", "deploy", "lmeval", "mlrb-peak-memory")
    measured = os.path.join(out, "gpt2-measured.json")
    subprocess.run([sys.executable, script, os.path.join(out, "gpt2"), "2000", "float32", measured], check=True)
    with open(measured, encoding="utf-8") as f:
        res["gpt2 1024 positions"] = json.load(f)
    return res


def main():
    out = sys.argv[1]
    report = {"torch": torch.__version__, "transformers": transformers.__version__, "models": {}}
    for name, (dtype, fields) in ARCHS.items():
        cfg, model = build(fields, dtype)
        report["models"][name] = save(out, name, cfg, model)
    cfg, model = build(ARCHS["phi-2"][1], "float16")
    report["models"]["auto-map"] = save(out, "auto-map", cfg, model, {"auto_map": {"AutoModelForCausalLM": "modeling_custom.Custom"}})
    try:
        import peft

        cfg, model = build(ARCHS["gpt2"][1], "float32")
        lora = peft.get_peft_model(model, peft.LoraConfig(r=8, target_modules=["c_attn"]))
        d = os.path.join(out, "peft-adapter")
        os.makedirs(d, exist_ok=True)
        lora.peft_config["default"].save_pretrained(d)
        write_sparse(os.path.join(d, "adapter_model.safetensors"), [(n, t) for n, t in lora.named_parameters() if "lora_" in n])
        report["models"]["peft-adapter"] = d
    except ImportError:
        report["peft"] = "not installed"
    if "--peak" in sys.argv and torch.cuda.is_available():
        report["peak"] = peak(out)
    path = os.path.join(out, "report.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(report, f)
    print(path)


if __name__ == "__main__":
    main()
