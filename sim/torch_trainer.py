#!/usr/bin/env python3
"""sim/torch_trainer.py CONFIG: a real PyTorch LoRA training loop that stands in for AI Toolkit's
`python run.py CONFIG` where no model may be downloaded. Owns: reading the AI Toolkit keys rung
changes, a small diffusion transformer with random weights, the training/sampling/saving loop and
AI Toolkit's output lines; PyTorch's own OutOfMemoryError goes through unedited. Not rung code.

Keys read (config.process[0]): train.batch_size, steps, lr, gradient_accumulation(_steps),
gradient_checkpointing (torch.utils.checkpoint), disable_sampling, skip_first_sample,
cache_text_embeddings, unload_text_encoder; datasets[].resolution/batch_size/num_frames/folder_path;
sample.width/height/sample_steps/sample_every/num_frames/samples[]/prompts; model.arch, quantize
(int8 weights, dequantized per layer), low_vram and layer_offloading(+_transformer_percent) (that
share of the transformer's blocks kept on the CPU, copied in per forward); save.save_every;
training_folder (checkpoints; the same config.name resumes from the newest one).

Environment:
  RUNG_GPU_CAP_GIB / RUNG_GPU_CAP_MIB  cap the process's GPU memory (torch.cuda.set_per_process_memory_fraction)
  RUNG_GPU_MEMORY_MIB  set by rung-worker --gpu-memory-mib: the GPU's memory as rung counts it; on CUDA
                      the whole card, the context and other processes included (the allocator gets what
                      is left of it); on the CPU a cap like RUNG_GPU_CAP_MIB
  RUNG_TORCH_DEVICE   cuda | cpu (default: cuda when available)
  RUNG_TORCH_NET      full | tiny (default: full on cuda, tiny on cpu; tiny also divides pixels by 4)
  RUNG_GPU_FAKE=1     on the CPU: count tensor bytes (weights, saved activations, working set) and
                      raise torch.cuda.OutOfMemoryError in PyTorch's wording when the cap is passed;
                      registers itself in the simulated nvidia-smi's state file (RUNG_SIM_STATE)
  RUNG_TORCH_STATS    append one JSON line per run: pid, times, outcome, peaks per phase (MiB)
  RUNG_TORCH_RUN_DIR  checkpoint folder (else training_folder, else ./output)
  RUNG_TORCH_IMAGES_PER_BUCKET (16), RUNG_TORCH_PLAN=1 (print the parsed settings as JSON, exit)
"""
import contextlib
import fcntl
import json
import math
import os
import signal
import sys
import time

ARCHS = {
    # name: hidden, depth, heads, text-encoder layers, frames per latent frame
    "flux": (1024, 48, 16, 4, 4),
    "flux2": (1280, 48, 20, 6, 4),
    "qwen_image": (1280, 40, 20, 6, 4),
    "sdxl": (768, 24, 12, 2, 4),
    "wan22_14b": (1024, 48, 16, 4, 4),
    "wan22_5b": (768, 32, 12, 4, 4),
    "ltx2": (1024, 32, 16, 4, 8),
}
TINY = (64, 4, 4, 1)  # hidden, depth, heads, text layers on the CPU
LATENT_CH = 16
PATCH = 2
VAE_DOWN = 8
TEXT_TOKENS = 64
LORA_RANK = 16
MAX_SKIPS = 3
MIB = 1048576.0


def log(msg=""):
    print(msg, flush=True)


def err(msg):
    sys.stderr.write(msg)
    sys.stderr.flush()


def num(obj, key, default):
    v = obj.get(key) if isinstance(obj, dict) else None
    if isinstance(v, bool):
        return int(v)
    return v if isinstance(v, (int, float)) else default


def flag(obj, key, default):
    return bool(num(obj, key, default))


def load_config(path):
    with open(path) as f:
        text = f.read()
    if path.endswith((".yaml", ".yml")):
        import yaml  # AI Toolkit reads YAML too; JSON is all the worker writes
        return yaml.safe_load(text)
    return json.loads(text)


def frames_latent(frames, tc):
    return 1 if frames <= 1 else (int(frames) - 1) // tc + 1


class Plan:
    """The settings of one run, read from config.process[0] the way AI Toolkit reads them."""

    def __init__(self, doc):
        cfg = doc.get("config") if isinstance(doc, dict) else None
        procs = cfg.get("process") if isinstance(cfg, dict) else None
        proc = procs[0] if isinstance(procs, list) and procs and isinstance(procs[0], dict) else None
        if proc is None or not isinstance(proc.get("train"), dict):
            raise ValueError("config file must have a config.process[0] with train settings")
        train, model = proc["train"], proc.get("model") or {}
        sample, save = proc.get("sample") or {}, proc.get("save") or {}
        if num(train, "gradient_accumulation", 1) > 1 and num(train, "gradient_accumulation_steps", 1) > 1:
            raise ValueError("gradient_accumulation and gradient_accumulation_steps are mutually exclusive")
        self.name = cfg.get("name") or "my_lora"
        arch = model.get("arch") or ("flux" if model.get("is_flux") else "sdxl")
        self.arch = str(arch).split(":")[0]
        self.shape = ARCHS.get(self.arch, ARCHS["sdxl"])
        self.steps = int(num(train, "steps", 1000))
        self.lr = float(num(train, "lr", 1e-4))
        self.grad_accum = int(max(num(train, "gradient_accumulation", 1), num(train, "gradient_accumulation_steps", 1)))
        self.ckpt = flag(train, "gradient_checkpointing", True)
        self.sampling = not flag(train, "disable_sampling", False)
        self.baseline = self.sampling and not flag(train, "skip_first_sample", False)
        self.cache_te = flag(train, "cache_text_embeddings", False) or flag(train, "unload_text_encoder", False)
        self.quantize = flag(model, "quantize", False)
        self.low_vram = flag(model, "low_vram", False)
        offload = 0.0
        if flag(model, "layer_offloading", False):
            offload = min(max(float(num(model, "layer_offloading_transformer_percent", 1.0)), 0.0), 1.0)
        if self.low_vram:
            offload = max(offload, 0.5)
        self.offload = offload
        self.save_every = int(num(save, "save_every", num(train, "save_every", 250)))
        self.sample_every = int(num(sample, "sample_every", 100))
        tbatch = int(num(train, "batch_size", 1))
        self.datasets = []
        for ds in proc.get("datasets") or [{}]:
            res = ds.get("resolution", 512)
            buckets = sorted({int(r) for r in (res if isinstance(res, list) else [res])}, reverse=True) or [512]
            self.datasets.append({"folder": ds.get("folder_path") or "dataset", "buckets": buckets,
                                  "batch": max(1, int(num(ds, "batch_size", tbatch))),
                                  "frames": max(1, int(num(ds, "num_frames", 1)))})
        items = sample.get("samples") if isinstance(sample.get("samples"), list) else []
        prompts = sample.get("prompts") if isinstance(sample.get("prompts"), list) else []
        base = {"width": int(num(sample, "width", 512)), "height": int(num(sample, "height", 512)),
                "steps": int(num(sample, "sample_steps", 20)), "frames": int(num(sample, "num_frames", 1))}
        self.samples = []
        for it in items or [{}] * max(1, len(prompts)):
            it = it if isinstance(it, dict) else {}
            self.samples.append({"width": int(num(it, "width", base["width"])),
                                 "height": int(num(it, "height", base["height"])),
                                 "steps": int(num(it, "sample_steps", base["steps"])),
                                 "frames": int(num(it, "num_frames", base["frames"]))})
        self.training_folder = proc.get("training_folder")

    def as_json(self):
        return {"name": self.name, "arch": self.arch, "steps": self.steps, "grad_accum": self.grad_accum,
                "gradient_checkpointing": self.ckpt, "sampling": self.sampling, "baseline": self.baseline,
                "cache_text_embeddings": self.cache_te, "quantize": self.quantize, "low_vram": self.low_vram,
                "offload": self.offload, "save_every": self.save_every, "sample_every": self.sample_every,
                "datasets": self.datasets, "samples": self.samples,
                "latent_frames": [frames_latent(d["frames"], self.shape[4]) for d in self.datasets]}


PLAN_ONLY = os.environ.get("RUNG_TORCH_PLAN") == "1"
if not PLAN_ONLY:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint as torch_checkpoint
else:  # the plan needs no torch: CI machines without it can still check config handling
    torch = nn = F = torch_checkpoint = None


class Meter:
    """Where memory is counted. On CUDA: PyTorch's allocator (peaks per phase). With RUNG_GPU_FAKE on
    the CPU: a count of the tensor bytes a GPU would hold, checked against the cap."""

    def __init__(self, device, cap_bytes, fake, total_bytes):
        self.device, self.cap, self.fake, self.total = device, cap_bytes, fake, total_bytes
        self.resident = 0   # weights, LoRA grads and optimizer state on the "device"
        self.saved = 0      # activations autograd keeps for backward
        self.peak = 0
        self.phase_peaks = {}
        self.phase = "load"
        self.param_ptrs = set()
        self.sim = SimRegistry() if fake else None

    def start_phase(self, phase):
        self.phase = phase
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        else:
            self.peak = self.resident + self.saved
        self.phase_peaks.setdefault(phase, {"allocated_mib": 0.0, "reserved_mib": 0.0})

    def end_phase(self):
        p = self.phase_peaks.setdefault(self.phase, {"allocated_mib": 0.0, "reserved_mib": 0.0})
        if self.device.type == "cuda":
            a, r = torch.cuda.max_memory_allocated() / MIB, torch.cuda.max_memory_reserved() / MIB
        else:
            a = r = self.peak / MIB
        p["allocated_mib"] = round(max(p["allocated_mib"], a), 1)
        p["reserved_mib"] = round(max(p["reserved_mib"], r), 1)

    def set_resident(self, nbytes):
        self.check(max(0, nbytes - self.resident))
        self.resident = nbytes

    def check(self, working):
        """Fake mode: the bytes held now plus WORKING more must fit under the cap."""
        if not self.fake:
            return
        held = self.resident + self.saved
        if self.cap and held + working > self.cap:  # as on a GPU: the failed allocation is never held
            raise torch.cuda.OutOfMemoryError(self.oom_text(working, held))
        if held + working > self.peak:
            self.peak = held + working
        if self.sim:
            self.sim.set_used(held + working)

    def oom_text(self, want, held):
        free = max(0, self.cap - held)
        return ("CUDA out of memory. Tried to allocate %s. GPU 0 has a total capacity of %s of which %s is free. "
                "Including non-PyTorch memory, this process has %s memory in use. Of the allocated memory %s is "
                "allocated by PyTorch, and %s is reserved by PyTorch but unallocated. If reserved but unallocated "
                "memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
                "fragmentation.  See documentation for Memory Management  "
                "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)" % (
                    fmt_size(want), fmt_size(self.total), fmt_size(free), fmt_size(held),
                    fmt_size(held), fmt_size(0)))

    def pack(self, t):
        if self.fake and t.data_ptr() not in self.param_ptrs:
            self.saved += t.numel() * t.element_size()
        return t

    def clear_saved(self):
        self.saved = 0

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)


def fmt_size(nbytes):
    """PyTorch's format_size."""
    if nbytes <= 1024:
        return "%d bytes" % nbytes
    if nbytes <= MIB:
        return "%.2f KiB" % (nbytes / 1024.0)
    if nbytes <= 1024 * MIB:
        return "%.2f MiB" % (nbytes / MIB)
    return "%.2f GiB" % (nbytes / (1024 * MIB))


class SimRegistry:
    """Fake mode only: the trainer's entry in the simulated nvidia-smi's state file (sim/README.md),
    updated under the same flock as bin/sim/rung-sim-trainer, so the worker and gpu-check.sh see it."""

    def __init__(self):
        self.path = os.environ.get("RUNG_SIM_STATE") or ""
        self.last = -1
        self.uuid = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]

    def set_used(self, nbytes):
        mib = int(math.ceil(nbytes / MIB)) if nbytes > 0 else 0
        if not self.path or not os.path.exists(self.path) or abs(mib - self.last) < 1:
            return
        self.last = mib
        with open(self.path + ".lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            with open(self.path) as f:
                st = json.load(f)
            for i, g in enumerate(st.get("gpus", [])):
                procs = [p for p in g.get("processes", []) if not (p.get("trainer") and
                                                                    (p.get("pid") == os.getpid() or not alive(p.get("pid"))))]
                if mib > 0 and (self.uuid in (g.get("uuid"), str(i))):
                    procs.append({"pid": os.getpid(), "used_mib": mib, "name": "python", "trainer": True})
                g["processes"] = procs
            tmp = "%s.tmp.%d" % (self.path, os.getpid())
            with open(tmp, "w") as f:
                json.dump(st, f, indent=2)
            os.rename(tmp, self.path)


def alive(pid):
    try:
        os.kill(int(pid), 0)
        return True
    except (OSError, TypeError, ValueError):
        return False


# ---- the network: a diffusion transformer with LoRA adapters ----

if torch is not None:
    class LoRALinear(nn.Module):
        """A frozen linear layer (bf16, or int8 with a per-row scale when quantized; on the CPU when
        offloaded) plus a trainable low-rank adapter."""

        def __init__(self, fin, fout, dev, dtype):
            super().__init__()
            w = torch.empty(fout, fin, device=dev, dtype=dtype)
            nn.init.normal_(w, std=fin ** -0.5)
            self.weight = nn.Parameter(w, requires_grad=False)
            self.scale = None
            self.lora_a = nn.Parameter(torch.randn(LORA_RANK, fin, device=dev) * fin ** -0.5)
            self.lora_b = nn.Parameter(torch.zeros(fout, LORA_RANK, device=dev))
            self.dev = dev

        def quantize(self):
            w = self.weight.data.float()
            scale = w.abs().amax(dim=1, keepdim=True).clamp(min=1e-8) / 127.0
            q = (w / scale).round().clamp(-127, 127).to(torch.int8)
            self.weight = nn.Parameter(q, requires_grad=False)
            self.scale = scale.to(torch.bfloat16 if self.dev.type == "cuda" else torch.float32)

        def offload(self):
            self.weight = nn.Parameter(self.weight.data.to("cpu").pin_memory()
                                       if self.dev.type == "cuda" else self.weight.data, requires_grad=False)

        def forward(self, x):
            w = self.weight.to(self.dev, non_blocking=True)
            if self.scale is not None:
                w = w.to(self.scale.dtype) * self.scale.to(self.dev)
            w = w.to(x.dtype)
            return F.linear(x, w) + F.linear(F.linear(x, self.lora_a.to(x.dtype)), self.lora_b.to(x.dtype))

    def attend(q, k, v):
        if hasattr(F, "scaled_dot_product_attention"):
            return F.scaled_dot_product_attention(q, k, v)
        a = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
        return a @ v

    class Block(nn.Module):
        """Pre-norm attention + MLP. Video blocks alternate attention within a frame (spatial) and
        across frames at one position (temporal), as factorised video transformers do."""

        def __init__(self, dim, heads, temporal, dev, dtype):
            super().__init__()
            self.heads, self.temporal = heads, temporal
            self.n1 = nn.LayerNorm(dim, device=dev)
            self.n2 = nn.LayerNorm(dim, device=dev)
            self.qkv = LoRALinear(dim, 3 * dim, dev, dtype)
            self.proj = LoRALinear(dim, dim, dev, dtype)
            self.fc1 = LoRALinear(dim, 4 * dim, dev, dtype)
            self.fc2 = LoRALinear(4 * dim, dim, dev, dtype)
            self.meter = None

        def forward(self, x, cond):
            b, f, s, d = x.shape
            if self.meter is not None:  # fake mode: the block's working set, qkv + MLP hidden
                self.meter.check(9 * x.numel() * x.element_size())
            h = self.n1(x + cond).to(x.dtype)
            if self.temporal and f > 1:
                h = h.transpose(1, 2).reshape(b * s, f, d)
            else:
                h = h.reshape(b * f, s, d)
            q, k, v = self.qkv(h).reshape(h.shape[0], h.shape[1], 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            a = attend(q, k, v).transpose(1, 2).reshape(h.shape[0], h.shape[1], d)
            a = self.proj(a)
            if self.temporal and f > 1:
                a = a.reshape(b, s, f, d).transpose(1, 2)
            else:
                a = a.reshape(b, f, s, d)
            x = x + a
            return x + self.fc2(F.gelu(self.fc1(self.n2(x).to(x.dtype))))

    class DiT(nn.Module):
        def __init__(self, dim, depth, heads, video, dev, dtype):
            super().__init__()
            pin = LATENT_CH * PATCH * PATCH
            self.inp = nn.Linear(pin, dim, device=dev)
            self.tproj = nn.Linear(256, dim, device=dev)
            self.blocks = nn.ModuleList([Block(dim, heads, video and i % 2 == 1, dev, dtype) for i in range(depth)])
            self.out = nn.Linear(dim, pin, device=dev)
            for p in list(self.inp.parameters()) + list(self.tproj.parameters()) + list(self.out.parameters()):
                p.requires_grad_(False)

        def forward(self, lat, t, ctx, ckpt, dtype):
            # lat: (B, C, F, H, W) latents -> (B, F, S, PATCH*PATCH*C) tokens
            b, c, f, hh, ww = lat.shape
            x = lat.reshape(b, c, f, hh // PATCH, PATCH, ww // PATCH, PATCH).permute(0, 2, 3, 5, 1, 4, 6)
            x = x.reshape(b, f, (hh // PATCH) * (ww // PATCH), c * PATCH * PATCH)
            freqs = torch.exp(-math.log(10000.0) * torch.arange(128, device=lat.device) / 128.0)
            temb = torch.cat([torch.sin(t[:, None] * freqs), torch.cos(t[:, None] * freqs)], dim=1)
            cond = (self.tproj(temb) + ctx.mean(dim=1)).to(dtype)[:, None, None, :]
            x = self.inp(x).to(dtype)
            for blk in self.blocks:
                if ckpt and torch.is_grad_enabled():
                    x = torch_checkpoint(blk, x, cond, use_reentrant=False)
                else:
                    x = blk(x, cond)
            x = self.out(x.float())
            x = x.reshape(b, f, hh // PATCH, ww // PATCH, c, PATCH, PATCH).permute(0, 4, 1, 2, 5, 3, 6)
            return x.reshape(b, c, f, hh, ww)

    class TextEncoder(nn.Module):
        def __init__(self, dim, layers, dev, dtype):
            super().__init__()
            self.emb = nn.Embedding(4096, dim, device=dev, dtype=dtype)
            self.layers = nn.ModuleList([nn.Linear(dim, dim * 4, device=dev, dtype=dtype) for _ in range(layers)])
            self.downs = nn.ModuleList([nn.Linear(dim * 4, dim, device=dev, dtype=dtype) for _ in range(layers)])
            self.requires_grad_(False)

        def forward(self, ids):
            x = self.emb(ids)
            for up, down in zip(self.layers, self.downs):
                x = x + down(F.gelu(up(x)))
            return x.float()

    class VAEDecoder(nn.Module):
        """Latents to pixels, x8 up, one frame at a time (as video VAEs decode in chunks)."""

        def __init__(self, dev, dtype, width):
            super().__init__()
            chans = [LATENT_CH, width, width // 2, width // 4]
            mods = []
            for i in range(3):
                mods += [nn.Conv2d(chans[i], chans[i + 1], 3, padding=1, device=dev, dtype=dtype), nn.SiLU(),
                         nn.Upsample(scale_factor=2)]
            mods.append(nn.Conv2d(chans[3], 3, 3, padding=1, device=dev, dtype=dtype))
            self.net = nn.Sequential(*mods)
            self.requires_grad_(False)

        def forward(self, lat):
            return torch.stack([self.net(lat[:, :, i]) for i in range(lat.shape[2])], dim=2)


# ---- the run ----

class Stopped(Exception):
    pass


class Run:
    def __init__(self, plan, path):
        self.p, self.path = plan, path
        want = os.environ.get("RUNG_TORCH_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
        if want == "cuda" and not torch.cuda.is_available():
            raise RuntimeError("No CUDA GPUs are available")
        # an index: set_per_process_memory_fraction refuses a bare "cuda" (PyTorch 2.x)
        self.dev = torch.device("cuda", torch.cuda.current_device()) if want == "cuda" else torch.device(want)
        self.tiny = (os.environ.get("RUNG_TORCH_NET") or ("full" if want == "cuda" else "tiny")) == "tiny"
        self.px_div = 4 if self.tiny else 1
        self.dtype = torch.bfloat16 if self.dev.type == "cuda" else torch.float32
        self.fake = self.dev.type == "cpu" and os.environ.get("RUNG_GPU_FAKE") == "1"
        cap, card = cap_bytes(), card_bytes()
        if card and self.dev.type == "cuda":
            # a card of that size holds the CUDA context (and whatever else is on it) too, outside
            # PyTorch's fraction: the allocator gets what is left, as on a real card of that size
            free, whole = torch.cuda.mem_get_info(self.dev)
            card = max(card - (whole - free), int(MIB))  # never 0: that would be no cap
        if card:
            cap = min(cap, card) if cap else card
        total = cap or 24564 * MIB
        if self.dev.type == "cuda":
            total = torch.cuda.get_device_properties(self.dev).total_memory
            if cap:
                torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total), self.dev)
        self.meter = Meter(self.dev, cap, self.fake, total)
        self.t0 = time.time()
        self.outcome = "running"
        self.step = 0
        self.ipb = int(os.environ.get("RUNG_TORCH_IMAGES_PER_BUCKET", "16"))
        base = os.environ.get("RUNG_TORCH_RUN_DIR") or plan.training_folder or "output"
        self.run_dir = os.path.join(base, plan.name)
        self.bar_open = False

    # -- output --
    def bar(self, desc, n, total, t_start, postfix=None):
        frac = min(1.0, n / total) if total else 0.0
        cells = int(frac * 80)
        partial = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"]
        full = min(cells // 8, 10)
        bar = "█" * full + (partial[cells % 8] if full < 10 else "")
        bar += " " * (10 - len(bar))
        el = time.time() - t_start
        rate = (n / el) if el > 0 and n else 0
        rem = (total - n) / rate if rate else 0
        rate_s = ("%5.2fit/s" % rate) if rate >= 1 else (("%5.2fs/it" % (1 / rate)) if rate else "?it/s")
        err("\r%s: %3d%%|%s| %d/%d [%s<%s, %s%s]" % (desc, int(frac * 100), bar, n, total, clock(el),
                                                   clock(rem) if rate else "?", rate_s,
                                                   (", " + postfix) if postfix else ""))
        self.bar_open = True

    def end_bar(self):
        if self.bar_open:
            err("\n")
            self.bar_open = False

    # -- load --
    def resident_bytes(self):
        n = 0
        for mod in (getattr(self, "model", None), getattr(self, "te", None), getattr(self, "vae", None)):
            if mod is None:
                continue
            for prm in mod.parameters():
                if prm.device.type == self.dev.type and not getattr(self, "offloaded", set()).intersection({id(prm)}):
                    n += prm.numel() * prm.element_size()
                    if prm.grad is not None:
                        n += prm.grad.numel() * prm.grad.element_size()
        opt = getattr(self, "opt", None)
        if opt is not None:
            for st in opt.state.values():
                n += sum(v.numel() * v.element_size() for v in st.values() if torch.is_tensor(v) and v.dim())
        return n

    def load(self):
        p = self.p
        dim, depth, heads, te_layers, _ = p.shape
        if self.tiny:
            dim, depth, heads, te_layers = TINY
        video = any(d["frames"] > 1 for d in p.datasets) or any(s["frames"] > 1 for s in p.samples)
        self.meter.start_phase("load")
        log("Loading %s model" % p.arch)
        log("Loading transformer")
        self.offloaded = set()
        self.model = DiT(dim, depth, heads, video, self.dev, self.dtype)
        self.meter.set_resident(self.resident_bytes())
        if p.quantize:
            log("Quantizing Transformer")
            for m in self.model.modules():
                if isinstance(m, LoRALinear):
                    m.quantize()
        if p.offload > 0:
            n = int(round(depth * p.offload))
            for blk in list(self.model.blocks)[:n]:
                for m in blk.modules():
                    if isinstance(m, LoRALinear):
                        m.offload()
                        if self.fake:
                            self.offloaded.add(id(m.weight))
            if self.dev.type == "cuda":
                torch.cuda.empty_cache()
        self.meter.set_resident(self.resident_bytes())
        log("Loading text encoder")
        te_dev = torch.device("cpu") if p.low_vram else self.dev
        self.te = TextEncoder(dim, te_layers, te_dev, self.dtype if te_dev.type == "cuda" else torch.float32)
        if p.quantize:
            log("Quantizing Text Encoder")
        self.meter.set_resident(self.resident_bytes())
        log("Loading VAE")
        self.vae_width = 32 if self.tiny else 256
        self.vae = VAEDecoder(self.dev, self.dtype, self.vae_width)
        self.meter.set_resident(self.resident_bytes())
        for blk in self.model.blocks:
            blk.meter = self.meter if self.fake else None
        self.meter.param_ptrs = {prm.data_ptr() for prm in self.model.parameters()}
        log("Making pipe")
        log("Preparing Model")
        log("Model Loaded")
        self.lora = [prm for prm in self.model.parameters() if prm.requires_grad]
        self.meter.end_phase()

    def encode(self, n):
        g = torch.Generator().manual_seed(n)
        ids = torch.randint(0, 4096, (1, TEXT_TOKENS), generator=g).to(next(self.te.parameters()).device)
        with torch.no_grad():
            return self.te(ids).to(self.dev)

    def unload_te(self):
        if self.p.cache_te and self.te is not None:
            self.te_cache = self.encode(0)
            self.te = None
            if self.dev.type == "cuda":
                torch.cuda.empty_cache()
            self.meter.set_resident(self.resident_bytes())

    def ctx(self, n=0):
        return self.te_cache if self.te is None else self.encode(n)

    # -- data --
    def batches(self):
        """Batches per epoch, dataset by dataset, largest bucket first (AI Toolkit groups batches by
        bucket); each bucket holds RUNG_TORCH_IMAGES_PER_BUCKET items."""
        out = []
        for d in self.p.datasets:
            for r in d["buckets"]:
                for _ in range(max(1, self.ipb // d["batch"])):
                    out.append((d["batch"], r, d["frames"]))
        return out

    def datasets(self):
        for d in self.p.datasets:
            log("Dataset: %s" % d["folder"])
            log("  -  Preprocessing image dimensions")
            log("  -  Found %d images" % (self.ipb * len(d["buckets"])))
            log("Bucket sizes for %s:" % d["folder"])
            for r in d["buckets"]:
                log("%dx%d: %d files" % (r, r, self.ipb))
            log("%d buckets made" % len(d["buckets"]))
            log("Caching latents for %s" % d["folder"])
            log(" - Saving latents to disk")
            t = time.time()
            self.bar("Caching latents to disk", self.ipb * len(d["buckets"]), self.ipb * len(d["buckets"]), t)
            self.end_bar()

    def latents(self, batch, px_w, px_h, frames, seed):
        g = torch.Generator().manual_seed(seed)
        lf = frames_latent(frames, self.p.shape[4])
        down = VAE_DOWN * PATCH * self.px_div
        h, w = max(1, px_h // down) * PATCH, max(1, px_w // down) * PATCH
        return torch.randn(batch, LATENT_CH, lf, h, w, generator=g).to(self.dev)

    # -- phases --
    def sample(self, phase):
        self.meter.start_phase(phase)
        n = len(self.p.samples)
        t = time.time()
        self.bar("Generating Samples", 0, n, t)
        with torch.no_grad(), self.autocast():
            for i, s in enumerate(self.p.samples):
                x = self.latents(1, s["width"], s["height"], s["frames"], 1000 + i)
                ctx = self.ctx(i)
                for k in range(max(1, s["steps"])):
                    tt = torch.full((1,), 1.0 - k / max(1, s["steps"]), device=self.dev)
                    x = x - self.model(x, tt, ctx, False, self.dtype).float() / max(1, s["steps"])
                # the decoder's largest feature map: one frame at full size, a quarter of its width
                self.meter.check(x.shape[-1] * x.shape[-2] * 64 * self.vae_width // 4 * x.element_size() * 2)
                self.vae(x.to(self.dtype))
                self.bar("Generating Samples", i + 1, n, t)
        self.end_bar()
        self.meter.end_phase()

    def autocast(self):
        if self.dev.type == "cuda":
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def train_step(self, batch, seed):
        bsz, res, frames = batch
        for micro in range(self.p.grad_accum):
            lat = self.latents(bsz, res, res, frames, seed * 31 + micro)
            noise = torch.randn_like(lat)
            t = torch.rand(bsz, device=self.dev)
            tt = t[:, None, None, None, None]
            noisy = (1 - tt) * lat + tt * noise
            with self.meter.hooks(), self.autocast():
                pred = self.model(noisy, t, self.ctx(), self.p.ckpt, self.dtype)
                loss = F.mse_loss(pred.float(), noise - lat) / self.p.grad_accum
            if self.fake and self.p.ckpt:  # checkpoint keeps each block's input: tokens x hidden per block
                tokens = noisy.numel() // (LATENT_CH * PATCH * PATCH)
                esize = torch.empty((), dtype=self.dtype).element_size()
                self.meter.saved += len(self.model.blocks) * tokens * self.model.inp.out_features * esize
            self.meter.check(0)
            loss.backward()
            self.meter.clear_saved()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        self.meter.set_resident(self.resident_bytes())
        return loss.item() * self.p.grad_accum

    def save(self, step, final):
        prev = self.meter.phase
        self.meter.start_phase("save")
        if not final:
            self.end_bar()
            log("")
            log("Saving at step %d" % step)
        os.makedirs(self.run_dir, exist_ok=True)
        name = "%s.pt" % self.p.name if final else "%s_%09d.pt" % (self.p.name, step)
        path = os.path.join(self.run_dir, name)
        state = {k: v.detach().to("cpu") for k, v in self.model.state_dict().items() if "lora_" in k}
        torch.save({"step": step, "lora": state}, path + ".tmp")
        os.replace(path + ".tmp", path)
        log("Saved to %s" % path)
        self.meter.end_phase()
        self.meter.phase = prev

    def latest(self):
        best, path = -1, None
        if os.path.isdir(self.run_dir):
            for n in os.listdir(self.run_dir):
                if n.startswith(self.p.name + "_") and n.endswith(".pt"):
                    try:
                        s = int(n[len(self.p.name) + 1:-3])
                    except ValueError:
                        continue
                    if s > best:
                        best, path = s, os.path.join(self.run_dir, n)
        return best, path

    def train(self, start):
        p = self.p
        self.opt = torch.optim.AdamW(self.lora, lr=p.lr)
        batches = self.batches()
        skips = 0
        self.meter.start_phase("train")
        t = time.time()
        self.bar(p.name, start, p.steps, t)
        for k in range(start + 1, p.steps + 1):
            self.step = k
            did_oom = False
            try:
                loss = self.train_step(batches[(k - 1) % len(batches)], k)
                skips = 0
                self.bar(p.name, k, p.steps, t, "lr: %.1e loss: %.3e" % (p.lr, loss))
            except torch.cuda.OutOfMemoryError:
                did_oom = True  # handled below, once the failed step's tensors are gone with the traceback
            if did_oom:
                # AI Toolkit: skip the batch, and give up after 3 in a row (no PyTorch text printed)
                self.opt.zero_grad(set_to_none=True)
                self.meter.clear_saved()
                if self.dev.type == "cuda":
                    torch.cuda.empty_cache()
                skips += 1
                if skips > MAX_SKIPS:
                    self.end_bar()
                    raise ValueError("OOM during training step 3 times in a row, aborting training")
                self.end_bar()
                log("# OOM during training step, skipping batch %d/3 #" % skips)
            if k < p.steps and p.save_every > 0 and k % p.save_every == 0:
                self.meter.end_phase()
                self.save(k, False)
                self.meter.start_phase("train")
            if k < p.steps and p.sampling and p.sample_every > 0 and k % p.sample_every == 0:
                self.meter.end_phase()
                self.end_bar()
                self.sample("sample")
                self.meter.start_phase("train")
        self.end_bar()
        self.meter.end_phase()

    def run(self):
        p = self.p
        log("#############################################")
        log("# Running job: %s" % p.name)
        log("#############################################")
        log("")
        log("")
        log("Running  1 process")
        self.load()
        start, latest = self.latest()
        if start >= 0:
            log("#### IMPORTANT RESUMING FROM %s ####" % latest)
            log("Loading from %s" % latest)
            ck = torch.load(latest, map_location="cpu")
            self.model.load_state_dict(ck["lora"], strict=False)
            log("Found step %d in metadata, starting from there" % start)
        else:
            start = 0
        self.datasets()
        self.unload_te()
        if not p.baseline:
            log("Skipping first sample due to config setting")
        elif start <= 1:
            log("Generating baseline samples before training")
            self.sample("baseline_sample")
        self.train(min(start, p.steps))
        if p.sampling:
            self.sample("sample")
        log("")
        self.save(p.steps, True)

    def stats(self, outcome, error=None):
        path = os.environ.get("RUNG_TORCH_STATS")
        if not path:
            return
        p = self.p
        rec = {"name": p.name, "config": os.path.abspath(self.path), "pid": os.getpid(), "start": round(self.t0, 3), "end": round(time.time(), 3),
               "outcome": outcome, "phase": self.meter.phase, "step": self.step, "device": self.dev.type,
               "fake": self.fake, "net": "tiny" if self.tiny else "full", "cap_mib": round(self.meter.cap / MIB, 1),
               "peaks": self.meter.phase_peaks,
               "peak_allocated_mib": max([v["allocated_mib"] for v in self.meter.phase_peaks.values()] or [0]),
               "peak_reserved_mib": max([v["reserved_mib"] for v in self.meter.phase_peaks.values()] or [0]),
               "settings": {"batch": [d["batch"] for d in p.datasets], "buckets": [d["buckets"] for d in p.datasets],
                            "frames": [d["frames"] for d in p.datasets], "ckpt": p.ckpt, "sampling": p.sampling,
                            "samples": p.samples, "low_vram": p.low_vram, "quantize": p.quantize,
                            "grad_accum": p.grad_accum},
               "error": (str(error)[:300] if error else None)}
        if self.dev.type == "cuda":
            rec["torch_max_allocated_mib"] = round(torch.cuda.max_memory_allocated() / MIB, 1)
        with open(path, "a") as f:
            f.write(json.dumps(rec) + "\n")


def cap_bytes():
    """The allocator's cap: RUNG_GPU_CAP_MIB, else RUNG_GPU_CAP_GIB; 0: none."""
    mib, gib = os.environ.get("RUNG_GPU_CAP_MIB"), os.environ.get("RUNG_GPU_CAP_GIB")
    if mib:
        return int(float(mib) * MIB)
    return int(float(gib) * 1024 * MIB) if gib else 0


def card_bytes():
    """RUNG_GPU_MEMORY_MIB (rung-worker --gpu-memory-mib) in bytes: the whole card's memory; 0: none."""
    return int(float(os.environ.get("RUNG_GPU_MEMORY_MIB") or 0) * MIB)


def clock(s):
    s = int(round(s))
    return "%d:%02d:%02d" % (s // 3600, s // 60 % 60, s % 60) if s >= 3600 else "%02d:%02d" % (s // 60, s % 60)


def result_block(completed, failures):
    log("")
    log("========================================")
    log("Result:")
    log(" - %d completed job%s" % (completed, "" if completed == 1 else "s"))
    if failures:
        log(" - %d failure%s" % (failures, "" if failures == 1 else "s"))
    log("========================================")


def main(argv):
    if len(argv) != 2:
        err("usage: torch_trainer.py CONFIG\n")
        return 2
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if PLAN_ONLY:
        print(json.dumps(Plan(load_config(argv[1])).as_json()))
        return 0
    log("Running 1 job")
    run = None
    try:
        try:
            doc = load_config(argv[1])
        except FileNotFoundError:
            raise ValueError("Could not find config file %s" % argv[1])
        run = Run(Plan(doc), argv[1])
        run.run()
    except KeyboardInterrupt:
        if run:
            run.end_bar()
            run.stats("stopped")
        log("Job stopped")
        result_block(0, 0)
        return 0
    except Exception as e:  # AI Toolkit's run.py: report, print the result block, re-raise
        if run:
            run.end_bar()
            run.meter.end_phase()
            kind = "oom" if isinstance(e, torch.cuda.OutOfMemoryError) or "OOM during training" in str(e) else "error"
            run.stats(kind, e)
        log("Error running job: %s" % e)
        result_block(0, 1)
        if run and run.meter.sim:
            run.meter.sim.set_used(0)
        raise
    run.stats("ok")
    if run.meter.sim:
        run.meter.sim.set_used(0)
    log("")
    result_block(1, 0)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
