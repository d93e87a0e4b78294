//! Compute pipelines: each kernel compiled once, on first use, and kept.
//!
//! Compiling on first use rather than at start-up keeps opening a device fast (a software
//! driver compiles a pipeline in tens of milliseconds), and no kernel is compiled twice.
//! Every pipeline of `n` storage buffers shares one layout: binding 0 the parameter block
//! (a uniform with a dynamic offset into the recorder's ring), bindings 1..=n
//! `read_write` storage windows. Sharing the layout lets one bind group serve every kernel
//! with the same buffers, and lets the recorder cache bind groups.

use std::borrow::Cow;
use std::collections::HashMap;
use std::num::NonZeroU64;

use tensorfit_core::Result;

use crate::backend_error;
use crate::context::{catch, Context};
use crate::shaders::{Kernel, Shader, PARAM_WORDS};

/// The bind group layout and pipeline layout for kernels of one buffer count.
#[derive(Debug, Clone)]
struct Layout {
    group: wgpu::BindGroupLayout,
    pipeline: wgpu::PipelineLayout,
}

/// Shader modules, layouts and pipelines created so far.
#[derive(Debug, Default)]
pub(crate) struct Pipelines {
    modules: HashMap<Shader, wgpu::ShaderModule>,
    layouts: HashMap<usize, Layout>,
    /// Each kernel's pipeline with its bind group layout.
    pipelines: HashMap<&'static str, (wgpu::ComputePipeline, wgpu::BindGroupLayout)>,
}

impl Pipelines {
    /// The pipeline of `kernel` and its bind group layout, compiling it if needed.
    pub fn get(
        &mut self,
        ctx: &Context,
        kernel: &'static Kernel,
    ) -> Result<(wgpu::ComputePipeline, wgpu::BindGroupLayout)> {
        if let Some(p) = self.pipelines.get(kernel.entry) {
            return Ok(p.clone());
        }
        let device = &ctx.device;
        let layout = self
            .layouts
            .entry(kernel.buffers)
            .or_insert_with(|| make_layout(device, kernel.buffers))
            .clone();
        let name = format!("{}::{}", kernel.shader.file(), kernel.entry);
        let (pipeline, error) = catch(device, || {
            let module = self.modules.entry(kernel.shader).or_insert_with(|| {
                device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(kernel.shader.file()),
                    source: wgpu::ShaderSource::Wgsl(Cow::Borrowed(kernel.shader.source())),
                })
            });
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(&name),
                layout: Some(&layout.pipeline),
                module,
                entry_point: Some(kernel.entry),
                compilation_options: wgpu::PipelineCompilationOptions {
                    // Every kernel writes its workgroup memory before reading it.
                    zero_initialize_workgroup_memory: false,
                    ..Default::default()
                },
                cache: None,
            })
        });
        if let Some(e) = error {
            // A failed module would fail every later kernel of the file the same way.
            self.modules.remove(&kernel.shader);
            return Err(backend_error(format!("compiling {name}: {e}")));
        }
        let entry = (pipeline, layout.group);
        self.pipelines.insert(kernel.entry, entry.clone());
        Ok(entry)
    }
}

fn make_layout(device: &wgpu::Device, buffers: usize) -> Layout {
    let params = wgpu::BindGroupLayoutEntry {
        binding: 0,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Uniform,
            has_dynamic_offset: true,
            min_binding_size: NonZeroU64::new(PARAM_WORDS as u64 * 4),
        },
        count: None,
    };
    let storage = (1..=buffers as u32).map(|binding| wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only: false },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    });
    let entries: Vec<_> = std::iter::once(params).chain(storage).collect();
    let group = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("tensorfit kernel"),
        entries: &entries,
    });
    let pipeline = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some("tensorfit kernel"),
        bind_group_layouts: &[Some(&group)],
        immediate_size: 0,
    });
    Layout { group, pipeline }
}
