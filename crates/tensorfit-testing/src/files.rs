//! Files from elsewhere, byte for byte: what Python's `zipfile`, numpy and `safetensors`
//! write, for tests of the readers (valid files, and broken ones made by editing these).

/// A zip of `members`, stored (not compressed), as `zipfile` writes one.
pub fn stored_zip(members: &[(&str, &[u8])]) -> Vec<u8> {
    let (mut out, mut central) = (Vec::new(), Vec::new());
    for (name, data) in members {
        let at = out.len() as u32;
        let sizes = [(data.len() as u32).to_le_bytes(); 2].concat();
        out.extend(0x0403_4b50u32.to_le_bytes());
        out.extend([20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // version .. crc
        out.extend(&sizes);
        out.extend((name.len() as u16).to_le_bytes());
        out.extend([0, 0]);
        out.extend(name.as_bytes());
        out.extend(*data);
        central.extend(0x0201_4b50u32.to_le_bytes());
        central.extend([20, 0, 20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]); // versions .. crc
        central.extend(&sizes);
        central.extend((name.len() as u16).to_le_bytes());
        central.extend([0; 12]); // extra, comment, disk, attributes
        central.extend(at.to_le_bytes());
        central.extend(name.as_bytes());
    }
    let (dir_at, dir_len, n) = (out.len() as u32, central.len() as u32, members.len() as u16);
    out.extend(central);
    out.extend(0x0605_4b50u32.to_le_bytes());
    out.extend([0, 0, 0, 0]);
    out.extend([n.to_le_bytes(), n.to_le_bytes()].concat());
    out.extend(dir_len.to_le_bytes());
    out.extend(dir_at.to_le_bytes());
    out.extend([0, 0]);
    out
}

/// An `.npy` of `descr` and `shape` holding `data`.
pub fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend((header.len() as u16).to_le_bytes());
    out.extend(header.as_bytes());
    out.extend(data);
    out
}

/// A safetensors file of this header and data section, byte for byte.
pub fn safetensors(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend(header.as_bytes());
    out.extend(data);
    out
}
