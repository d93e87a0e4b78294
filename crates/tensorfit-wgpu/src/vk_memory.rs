//! The Vulkan memory query: device-local heap sizes and, with `VK_EXT_memory_budget`,
//! the driver's budget and current usage of those heaps.
//!
//! wgpu has no portable memory query, so this reaches under it: `Adapter::as_hal` gives
//! the Vulkan physical device and ash's instance, and `vkGetPhysicalDeviceMemoryProperties2`
//! with `VkPhysicalDeviceMemoryBudgetPropertiesEXT` chained answers. This is the crate's
//! only `unsafe` code, fenced here; every block states its invariant.

#![allow(unsafe_code)]

use ash::vk;

/// Device-local memory as Vulkan reports it, summed over the device-local heaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct VulkanMemory {
    /// Sum of the sizes of the heaps flagged `DEVICE_LOCAL`.
    pub device_local: u64,
    /// `VK_EXT_memory_budget`: (budget, usage) summed over the same heaps.
    pub budget: Option<(u64, u64)>,
}

/// Queries the adapter's Vulkan memory properties; `None` when the adapter is not a
/// Vulkan one (or is too old to answer).
pub(crate) fn query(adapter: &wgpu::Adapter) -> Option<VulkanMemory> {
    // SAFETY: the hal adapter is only borrowed for two read-only physical-device queries
    // below; nothing is created or destroyed through it, and the guard is dropped before
    // this function returns, while `adapter` is still alive.
    let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() }?;
    let instance = hal.shared_instance().raw_instance();
    let physical = hal.raw_physical_device();
    let caps = hal.physical_device_capabilities();
    let v11 = hal.shared_instance().instance_api_version() >= vk::API_VERSION_1_1
        && caps.properties().api_version >= vk::API_VERSION_1_1;

    let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
    let (props, with_budget) = if v11 {
        let has_budget = caps.supports_extension(ash::ext::memory_budget::NAME);
        let mut props2 = vk::PhysicalDeviceMemoryProperties2::default();
        if has_budget {
            props2 = props2.push_next(&mut budget);
        }
        // SAFETY: instance and physical device are live handles owned by wgpu; both are
        // Vulkan 1.1, so the core entry point exists; the budget structure is chained
        // only when the device supports VK_EXT_memory_budget.
        unsafe { instance.get_physical_device_memory_properties2(physical, &mut props2) };
        (props2.memory_properties, has_budget)
    } else {
        // SAFETY: a Vulkan 1.0 query on a live physical device owned by wgpu.
        let props = unsafe { instance.get_physical_device_memory_properties(physical) };
        (props, false)
    };

    let count = (props.memory_heap_count as usize).min(vk::MAX_MEMORY_HEAPS);
    let local: Vec<usize> = (0..count)
        .filter(|&i| {
            props.memory_heaps[i]
                .flags
                .contains(vk::MemoryHeapFlags::DEVICE_LOCAL)
        })
        .collect();
    let device_local = local.iter().map(|&i| props.memory_heaps[i].size).sum();
    let budget = with_budget.then(|| {
        let sum = |v: &[u64]| local.iter().map(|&i| v[i]).sum::<u64>();
        (sum(&budget.heap_budget), sum(&budget.heap_usage))
    });
    Some(VulkanMemory {
        device_local,
        budget,
    })
}
