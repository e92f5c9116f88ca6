//! `refuse_scalars!`: the methods of a `serde::Serializer` that only takes
//! some shapes, for every scalar shape it refuses.

/// Writes the methods of a `serde::Serializer` for the scalar shapes
/// (`bool`, the integers and floats, `char`, `str`, bytes, `None`, `()`
/// and unit structs), each returning `Err($refusal)`; the serializer
/// writes the methods of the shapes it takes, and `serialize_unit_variant`,
/// itself.
///
/// For a serializer that picks one shape out of a value (the fields of a
/// struct, the data of an enum variant) and refuses the others, so that
/// the caller falls back.
#[doc(hidden)]
#[macro_export]
macro_rules! refuse_scalars {
    ($refusal:expr) => {
        $crate::refuse_scalars!(@each $refusal;
            serialize_bool(bool),
            serialize_i8(i8),
            serialize_i16(i16),
            serialize_i32(i32),
            serialize_i64(i64),
            serialize_u8(u8),
            serialize_u16(u16),
            serialize_u32(u32),
            serialize_u64(u64),
            serialize_f32(f32),
            serialize_f64(f64),
            serialize_char(char),
            serialize_str(&str),
            serialize_bytes(&[u8]),
            serialize_none(),
            serialize_unit(),
            serialize_unit_struct(&'static str),
        );
    };
    (@each $refusal:expr; $($name:ident($($arg:ty),*)),* $(,)?) => {
        $(
            fn $name(self, $(_: $arg),*) -> ::core::result::Result<Self::Ok, Self::Error> {
                ::core::result::Result::Err($refusal)
            }
        )*
    };
}
